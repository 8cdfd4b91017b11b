"""Mint a principal token for a `signed` API key — run this in your business backend.

    python mint_token.py --sub wang --roles 物业经理 --tenant acme --ttl 300

The secret is the key entry's `token_secret` (RSVC keys file), read from the environment
variable PRINCIPAL_TOKEN_SECRET so it never appears on a command line.
"""

from __future__ import annotations

import argparse
import os
import time

import jwt


def mint(sub: str, roles: list[str], tenant: str, ttl_s: int, secret: str) -> str:
    """An HS256 token the service accepts for a `signed` key of ``tenant``."""
    now = int(time.time())
    claims = {"sub": sub, "roles": roles, "tenant": tenant, "iat": now, "exp": now + ttl_s}
    return jwt.encode(claims, secret, algorithm="HS256")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sub", required=True, help="end user id")
    parser.add_argument("--roles", default="", help="comma-separated roles")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--ttl", type=int, default=300, help="seconds until expiry")
    args = parser.parse_args()
    secret = os.environ["PRINCIPAL_TOKEN_SECRET"]
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    print(mint(args.sub, roles, args.tenant, args.ttl, secret))
