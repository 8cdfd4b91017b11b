"""Tenants' names as index names (design.md §4; docs/indexer.md, "Tenants and their indices").

The ground floor, with settings (which validates keys' tenants with it): imports nothing of
the project.
"""

from __future__ import annotations

import functools

# Tenants are isolated physically (design.md §4): each has its own index behind its own alias,
# ``<RSVC_INDEX_ALIAS>.<tenant slug>``. The slug keeps ``a``-``z`` and ``0``-``9`` and writes
# every other character as ``_`` and the hex of each of its UTF-8 bytes (``acme-corp`` →
# ``acme_2dcorp``, ``Acme`` → ``_41cme``): a name Elasticsearch accepts for an index, and one
# tenant's alone, since ``_`` appears only in escapes of fixed length and ``-`` not at all
# (``-`` separates the index generation: ``rsvc-chunks.acme_2dcorp-000002``).
DEFAULT_TENANT = "default"  # a key's tenant unless it names one (re-exported by the acl package)
# In the Casbin policy a tenant is matched exactly, never as a pattern (design.md §4): the one
# domain that is not a tenant's name is ``*`` alone, every tenant (a policy file's or the
# CLI's global rule; the console writes its own tenant only). So a tenant's name is plain:
# letters and digits of any script, and ``-``, ``_`` and ``.`` inside; never ``*``, a space,
# a comma (a CSV policy's separator), a quote, ``:`` or ``/``.
EVERY_TENANT = "*"
TENANT_PUNCTUATION = frozenset("-_.")
MAX_TENANT_SLUG = 160  # with the alias (≤ 64) and the generation, within 255 bytes
MAX_INDEX_ALIAS = 64


def tenant_slug(tenant: str) -> str:
    """``tenant`` as an index-name part: the same name always, another name never."""
    return "".join(
        c if ("a" <= c <= "z" or "0" <= c <= "9") else "".join(f"_{b:02x}" for b in c.encode())
        for c in tenant
    )


def tenant_of_slug(slug: str) -> str:
    """The tenant whose ``tenant_slug`` is ``slug`` (its inverse)."""
    out, raw, i = [], bytearray(), 0
    while i < len(slug):
        if slug[i] == "_":
            raw.append(int(slug[i + 1 : i + 3], 16))
            i += 3
            continue
        out.append(raw.decode() + slug[i])
        raw.clear()
        i += 1
    return "".join(out) + raw.decode()


def tenant_alias(index_alias: str, tenant: str) -> str:
    """The alias through which ``tenant``'s chunks are read and written."""
    return f"{index_alias}.{tenant_slug(tenant)}"


@functools.lru_cache(maxsize=4096)  # (every policy line names one of a few tenants)
def check_tenant(tenant: str) -> str:
    """``tenant``, if it is a plain name that can name an index; ValueError saying why not."""
    if not tenant or tenant != tenant.strip():
        raise ValueError(f"tenant {tenant!r} is empty or starts or ends with a space")
    bad = sorted({c for c in tenant if not (c.isalnum() or c in TENANT_PUNCTUATION)})
    if bad or not tenant[0].isalnum():
        why = f"may not contain {''.join(bad)!r}" if bad else "must start with a letter or digit"
        raise ValueError(
            f"tenant {tenant[:40]!r} {why}: a tenant is a plain name (letters and digits of any "
            "script, and - _ . inside), never a pattern"
        )
    if len(tenant_slug(tenant)) > MAX_TENANT_SLUG:
        raise ValueError(
            f"tenant {tenant[:40]!r}… is too long to name its index "
            f"({MAX_TENANT_SLUG} characters once written as an index name: a-z and 0-9 count "
            "one, other characters three per UTF-8 byte)"
        )
    return tenant
