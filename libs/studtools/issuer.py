"""The issuer tool, ``python -m studkit.auth`` (that documented command runs this module; so
does ``python -m studtools.issuer``): the only holder of the issuer's private key.

Mint a token (signed with ``STUD_ISSUER_KEY``, or ``--key`` for a service's own key)::

    STUD_ISSUER_KEY=.run/keys/issuer.pem python -m studkit.auth player alice --ttl 3600

Manage keys::

    python -m studkit.auth keygen new.pem                      # a new private key; prints its kid
    python -m studkit.auth public new.pem --signer service:table --add-to public-keys.json
    python -m studkit.auth retire KID --from public-keys.json  # drop a key from the set
    python -m studkit.auth dev-keys DIR                        # issuer + table, dealer, wallet
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from studkit.auth.config import ISSUER_KEY_ENV, issuer_from_env
from studkit.auth.principal import Principal, Role
from studkit.auth.signing import KeySet, SigningKey, check_signer
from studkit.auth.tokens import TokenIssuer
from studtools.devkeys import DEV_SERVICES, DevKeys, write_private

KEY_COMMANDS = ("keygen", "public", "retire", "dev-keys")


def _token_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m studkit.auth",
        description=f"Print a token signed with the issuer key ({ISSUER_KEY_ENV}); "
                    f"key commands: {', '.join(KEY_COMMANDS)} (see --help of each).")
    parser.add_argument("role", choices=[r.value for r in Role])
    parser.add_argument("name")
    parser.add_argument("--ttl", type=int, default=3600, help="seconds (default 3600)")
    parser.add_argument("--audience", help="the one service the token is for")
    parser.add_argument("--key", type=Path,
                        help=f"sign with this PEM key instead of {ISSUER_KEY_ENV} (a service "
                             "signs only for itself)")
    return parser


def _key_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m studkit.auth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    keygen = commands.add_parser("keygen", help="write a new Ed25519 private key (mode 0600)")
    keygen.add_argument("file", type=Path)
    public = commands.add_parser("public", help="the key-set entry of a private key")
    public.add_argument("file", type=Path)
    public.add_argument("--signer", required=True, help="issuer or service:<name>")
    public.add_argument("--add-to", type=Path,
                        help="add the entry to this key-set file (created if absent)")
    retire = commands.add_parser("retire", help="remove a key from a key-set file")
    retire.add_argument("kid", nargs="?", help="the key id (keygen printed it)")
    retire.add_argument("--from", dest="key_set", type=Path, required=True)
    dev = commands.add_parser("dev-keys", help="generate dev keys into a directory")
    dev.add_argument("directory", type=Path)
    dev.add_argument("--services", default=",".join(DEV_SERVICES))
    return parser


def _keys(args: argparse.Namespace) -> None:
    if args.command == "keygen":
        if args.file.exists():
            raise ValueError(f"{args.file} exists; refusing to overwrite a key")
        key = SigningKey.generate()
        write_private(args.file, key.pem())
        print(key.kid)
    elif args.command == "public":
        entry = SigningKey.from_pem(args.file.read_text()).verifying_key(
            check_signer(args.signer))
        if args.add_to is None:
            print(json.dumps(entry.to_jwk(), indent=2))
            return
        keys = (KeySet.from_json(args.add_to.read_text()).merged([entry])
                if args.add_to.exists() else KeySet([entry]))
        args.add_to.write_text(keys.to_json() + "\n")
        print(f"{entry.kid} ({entry.signer}) in {args.add_to}: {len(keys)} keys")
    elif args.command == "retire":
        keys = KeySet.from_json(args.key_set.read_text())
        if keys.get(args.kid) is None:
            raise ValueError(f"no key {args.kid} in {args.key_set}")
        kept = KeySet(k for k in keys if k.kid != args.kid)
        args.key_set.write_text(kept.to_json() + "\n")
        print(f"{args.kid} retired: {len(kept)} keys left in {args.key_set}")
    else:
        services = [s.strip() for s in args.services.split(",") if s.strip()]
        DevKeys.generate(services).write(args.directory)
        print(f"dev keys for the issuer and {', '.join(services)} in {args.directory}")


def _key_args(argv: list[str]) -> argparse.Namespace:
    """The key commands' arguments. ``retire KID``: a key id is a base64url thumbprint, and
    one in 64 starts with "-", which argparse takes for an unknown option (and ``--`` does
    not help under a subcommand): such a word is the key id."""
    parser = _key_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "retire" and args.kid is None and len(extra) == 1:
        args.kid, extra = extra[0], []
    if args.command == "retire" and args.kid is None:
        parser.error("retire: the key id to retire is required")
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Mint a token, or manage keys; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in KEY_COMMANDS:
            _keys(_key_args(argv))
            return 0
        args = _token_parser().parse_args(argv)
        issuer = (TokenIssuer(SigningKey.from_pem(args.key.read_text())) if args.key
                  else issuer_from_env(os.environ))
        print(issuer.issue(Principal(Role(args.role), args.name), args.ttl, args.audience))
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
