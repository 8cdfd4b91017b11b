#!/usr/bin/env bash
# A throwaway OpenLDAP server for the test suite and the directory benchmark (issue #35 §3),
# from Debian's `slapd` package — installed with apt-get when it is missing and we are root.
#
#   scripts/ldap.sh start PORT   a fresh mdb database for dc=example,dc=org (memberOf overlay
#                                on), slapd on ldap://127.0.0.1:PORT with StartTLS (a
#                                throwaway CA in its folder: ca.pem); prints the URL
#   scripts/ldap.sh load PORT LDIF  add LDIF's entries offline (slapadd: stopped, loaded,
#                                started again; for the directory benchmark's 55,000 entries)
#   scripts/ldap.sh stop-all     stop every server under RSVC_SERVERS_DIR (scripts/test's)
#   scripts/ldap.sh stop PORT    stop it and delete its folder
#
# The administrator is cn=admin,dc=example,dc=org with the password "admin": a test
# directory on loopback, never a deployment. Its folder is under /var/tmp (a checkout in a
# private folder may not be reachable).
set -euo pipefail

# Under RSVC_SERVERS_DIR when scripts/test set it (its servers, stopped together on any exit).
BASE=${RSVC_SERVERS_DIR:+$RSVC_SERVERS_DIR/ldap}
BASE=${BASE:-/var/tmp/retrieval-svc-ldap}
SUFFIX="dc=example,dc=org"
log() { echo "ldap: $*" >&2; }
source "$(dirname "${BASH_SOURCE[0]}")/_say.sh"

ensure_slapd() {
  if { ! command -v slapd >/dev/null 2>&1 && [ ! -x /usr/sbin/slapd ]; } ||
    ! command -v ldapadd >/dev/null 2>&1 ||
    ! command -v openssl >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      log "$(say2 "installing Debian's slapd, ldap-utils and openssl packages (once)" "安装 Debian 的 slapd、ldap-utils 和 openssl 软件包（只需一次）")"
      export DEBIAN_FRONTEND=noninteractive
      apt-get -o DPkg::Lock::Timeout=600 install -y -q slapd ldap-utils openssl >/dev/null 2>&1 ||
        { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1 && apt-get -o DPkg::Lock::Timeout=600 install -y -q slapd ldap-utils openssl >/dev/null; }
    fi
  fi
  [ -x /usr/sbin/slapd ] || { log "$(say2 "error: slapd not found (install Debian's slapd)" "错误：找不到 slapd（请安装 Debian 的 slapd）")"; exit 1; }
  command -v openssl >/dev/null || { log "$(say2 "error: openssl not found (install Debian's openssl)" "错误：找不到 openssl（请安装 Debian 的 openssl）")"; exit 1; }
}

stop_slapd() {
  if [ -f "$1/slapd.pid" ]; then
    local pid
    pid=$(cat "$1/slapd.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$1/slapd.pid"
  fi
}

serve() {  # dir port
  /usr/sbin/slapd -f "$1/slapd.conf" -h "ldap://127.0.0.1:$2/" >"$1/slapd.log" 2>&1 ||
    { cat "$1/slapd.log" >&2; exit 1; }
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
      echo "ldap://127.0.0.1:$2"
      return 0
    fi
    sleep 0.1
  done
  log "$(say2 "error: slapd did not listen on 127.0.0.1:$2" "错误：slapd 没有在 127.0.0.1:$2 上监听")"
  exit 1
}

cmd=${1:-}
port=${2:-}
source "$(dirname "${BASH_SOURCE[0]}")/_servers.sh"
server_commands "$cmd"
[[ "$port" =~ ^[0-9]+$ ]] || { say2 "usage: scripts/ldap.sh start|stop PORT | stop-all | --help" "用法：scripts/ldap.sh start|stop PORT | stop-all | --help" >&2; exit 2; }
dir=$BASE/$port

case "$cmd" in
  start)
    ensure_slapd
    rm -rf "$dir"
    mkdir -p "$dir/data"
    chmod 755 "$BASE" 2>/dev/null || true
    # A throwaway CA and a certificate for 127.0.0.1, for StartTLS.
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=retrieval-svc test CA" \
      -keyout "$dir/ca.key" -out "$dir/ca.pem" >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/san.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
      -CAcreateserial -days 2 -extfile "$dir/san.ext" -out "$dir/server.pem" >/dev/null 2>&1
    cat >"$dir/slapd.conf" <<CONF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb.la
moduleload memberof.la
moduleload syncprov.la
pidfile $dir/slapd.pid
sizelimit unlimited
TLSCACertificateFile $dir/ca.pem
TLSCertificateFile $dir/server.pem
TLSCertificateKeyFile $dir/server.key
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
overlay syncprov
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
    serve "$dir" "$port"
    ;;
  load)
    ldif=${3:-}
    [ -f "$ldif" ] && [ -f "$dir/slapd.conf" ] ||
      { say2 "usage: scripts/ldap.sh load PORT LDIF (after start)" "用法：scripts/ldap.sh load PORT LDIF（在 start 之后）" >&2; exit 2; }
    stop_slapd "$dir"
    /usr/sbin/slapadd -q -f "$dir/slapd.conf" -l "$ldif" >"$dir/slapadd.log" 2>&1 ||
      { cat "$dir/slapadd.log" >&2; exit 1; }
    serve "$dir" "$port"
    ;;
  stop)
    stop_slapd "$dir"
    rm -rf "$dir"
    ;;
  *)
    say2 "usage: scripts/ldap.sh start|stop PORT" "用法：scripts/ldap.sh start|stop PORT" >&2
    exit 2
    ;;
esac
