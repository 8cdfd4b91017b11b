#!/usr/bin/env bash
# A throwaway OpenLDAP server for the test suite and the directory benchmark (issue #35 §3),
# from Debian's `slapd` package — installed with apt-get when it is missing and we are root.
#
#   scripts/ldap.sh start PORT   a fresh mdb database for dc=example,dc=org (memberOf overlay
#                                on), slapd on ldap://127.0.0.1:PORT; prints the URL
#   scripts/ldap.sh stop PORT    stop it and delete its folder
#
# The administrator is cn=admin,dc=example,dc=org with the password "admin": a test
# directory on loopback, never a deployment. Its folder is under /var/tmp (a checkout in a
# private folder may not be reachable).
set -euo pipefail

BASE=/var/tmp/retrieval-svc-ldap
SUFFIX="dc=example,dc=org"
log() { echo "ldap: $*" >&2; }

ensure_slapd() {
  if ! command -v slapd >/dev/null 2>&1 && [ ! -x /usr/sbin/slapd ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      log "installing Debian's slapd and ldap-utils packages (once)"
      export DEBIAN_FRONTEND=noninteractive
      apt-get install -y -q slapd ldap-utils >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q slapd ldap-utils >/dev/null; }
    fi
  fi
  [ -x /usr/sbin/slapd ] || { log "error: slapd not found (install Debian's slapd)"; exit 1; }
}

cmd=${1:-}
port=${2:-}
[[ "$port" =~ ^[0-9]+$ ]] || { echo "usage: scripts/ldap.sh start|stop PORT" >&2; exit 2; }
dir=$BASE/$port

case "$cmd" in
  start)
    ensure_slapd
    rm -rf "$dir"
    mkdir -p "$dir/data"
    chmod 755 "$BASE" 2>/dev/null || true
    cat >"$dir/slapd.conf" <<CONF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb.la
moduleload memberof.la
pidfile $dir/slapd.pid
sizelimit unlimited
database mdb
maxsize 1073741824
suffix "$SUFFIX"
rootdn "cn=admin,$SUFFIX"
rootpw admin
directory $dir/data
index objectClass eq
index uid,cn eq
index member,memberOf eq
overlay memberof
memberof-refint TRUE
CONF
    cat >"$dir/base.ldif" <<LDIF
dn: $SUFFIX
objectClass: top
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,$SUFFIX
objectClass: organizationalUnit
ou: people

dn: ou=groups,$SUFFIX
objectClass: organizationalUnit
ou: groups
LDIF
    /usr/sbin/slapadd -f "$dir/slapd.conf" -l "$dir/base.ldif" >"$dir/slapadd.log" 2>&1 ||
      { cat "$dir/slapadd.log" >&2; exit 1; }
    /usr/sbin/slapd -f "$dir/slapd.conf" -h "ldap://127.0.0.1:$port/" >"$dir/slapd.log" 2>&1 ||
      { cat "$dir/slapd.log" >&2; exit 1; }
    for _ in $(seq 1 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "ldap://127.0.0.1:$port"
        exit 0
      fi
      sleep 0.1
    done
    log "error: slapd did not listen on 127.0.0.1:$port"
    exit 1
    ;;
  stop)
    if [ -f "$dir/slapd.pid" ]; then
      pid=$(cat "$dir/slapd.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: scripts/ldap.sh start|stop PORT" >&2
    exit 2
    ;;
esac
