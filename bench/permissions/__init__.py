"""Permissions and directories: folder rules' cost in a run, a company directory (LDAP) and
SCIM at scale, p99 while a large policy reloads.

    python -m bench.permissions.acl_rules | .directory | .scim | .policy_reload
"""
