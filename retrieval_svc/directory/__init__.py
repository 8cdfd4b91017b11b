"""People and groups from the company directory, as role grants of a tenant (issue #35 §3,
design.md §16): LDAP / Active Directory sync (``retrieval-svc policy sync-ldap``)."""

from retrieval_svc.directory.groups import (
    BindRefused,
    Directory,
    DirectoryError,
    Limits,
    Plan,
    RemovalLimit,
    plan,
)
from retrieval_svc.directory.ldap import DirectoryReplica, directory_stamp, read_directory
from retrieval_svc.directory.owners import planned, unclaimed
from retrieval_svc.directory.sync_file import LdapSync, load_sync

__all__ = [
    "BindRefused",
    "Directory",
    "DirectoryError",
    "DirectoryReplica",
    "LdapSync",
    "Limits",
    "Plan",
    "RemovalLimit",
    "directory_stamp",
    "load_sync",
    "plan",
    "planned",
    "read_directory",
    "unclaimed",
]
