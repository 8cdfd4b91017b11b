#!/usr/bin/env bash
# A throwaway Samba Active Directory domain controller for the test suite and the benchmarks,
# from Debian's `samba`, `samba-ad-dc`, `smbclient`, `winbind`, `krb5-user` and `ldb-tools`
# packages — installed with apt-get when they are missing and we are root.
#
#   scripts/samba-ad.sh start [ADDRESS]  provision a fresh domain CORP.EXAMPLE.ORG (NetBIOS
#                            CORP, DC dc1) into a new folder and start it on a loopback address
#                            of its own (127.0.0.N/32 added to `lo`, the first free one unless
#                            ADDRESS is given): LDAP 389, LDAPS 636 (a throwaway CA in its
#                            folder: tls/ca.pem), Kerberos 88/464, SMB 445, RPC 135/49152+ of
#                            that address alone. One share, 部门资料, on a folder in its tree,
#                            with NT ACLs kept in xattrs and enforced (acl_xattr), and a second,
#                            财务共享, alike, for tests that set a share ACL (`sharesec`) without
#                            narrowing the first for everyone else, and a third, DFS根, a DFS
#                            root (`msdfs root = yes`) where a test makes DFS links. Prints what
#                            tests need as KEY=value lines (also in its folder: dc.env)
#   scripts/samba-ad.sh stop ADDRESS   stop it, remove its address from `lo`, delete its folder
#   scripts/samba-ad.sh halt ADDRESS   stop its daemons only (its address, folder and domain
#                            kept): the server gone, as a file server that crashed or rebooted
#   scripts/samba-ad.sh resume ADDRESS start a halted DC again on the same address and domain
#   scripts/samba-ad.sh stop-all       stop every DC under RSVC_SERVERS_DIR (scripts/test's)
#   scripts/samba-ad.sh status         every DC under the folder: address, running or not
#
# Instances are independent: every path Samba writes (private, lock, state, cache, pid,
# ncalrpc, binddns, ntp_signd, logs) is in the instance's folder, and each instance runs in a
# mount namespace of its own where /run/samba is a folder of the instance — smbd finds
# winbindd's socket at a path compiled into libwbclient (/run/samba/winbindd), so two DCs
# sharing it would fail every SMB session with STATUS_INTERNAL_ERROR. Where a mount
# namespace cannot be made, a DC uses the real /run/samba and the script refuses to start a
# second one, naming the process that holds the socket.
#
# The administrator is CORP\Administrator with the password in dc.env: a test domain on
# loopback, never a deployment. Needs root (the address on `lo`, the namespace, Samba as a DC).
# Its folder is under /var/tmp (users' SMB sessions run as their own uid and must reach it).
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_say.sh"

# Under RSVC_SERVERS_DIR when scripts/test set it (its servers, stopped together on any exit).
BASE=${RSVC_SERVERS_DIR:+$RSVC_SERVERS_DIR/samba-ad}
BASE=${BASE:-/var/tmp/retrieval-svc-samba-ad}
# One lock for every instance on the machine, whichever folder it lives in: choosing and
# adding a loopback address is one step.
LOCK=/var/tmp/retrieval-svc-samba-ad.lock
REALM=CORP.EXAMPLE.ORG
DOMAIN=CORP
HOST=dc1
BASE_DN="DC=corp,DC=example,DC=org"
ADMIN_PASSWORD='Adm1n-Passw0rd-test'
SHARE=部门资料
SHARE2=财务共享
SHARE3=DFS根
log() { echo "samba-ad: $*" >&2; }

ensure_samba() {
  local missing=0 tool
  for tool in samba samba-tool smbd winbindd smbclient smbcacls ldbsearch kinit; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || missing=1
  done
  if [ "$missing" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "$(say2 "installing Debian's samba, samba-ad-dc, smbclient, winbind, krb5-user and ldb-tools (once)" "安装 Debian 的 samba、samba-ad-dc、smbclient、winbind、krb5-user 和 ldb-tools（只需一次）")"
    export DEBIAN_FRONTEND=noninteractive
    local pkgs="samba samba-ad-dc smbclient winbind krb5-user ldb-tools openssl"
    # shellcheck disable=SC2086
    apt-get -o DPkg::Lock::Timeout=600 install -y -q $pkgs >/dev/null 2>&1 ||
      { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1 && apt-get -o DPkg::Lock::Timeout=600 install -y -q $pkgs >/dev/null; }
  fi
  for tool in samba samba-tool smbclient smbcacls openssl; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
      { log "$(say2 "error: $tool not found (install Debian's samba, samba-ad-dc and smbclient)" "错误：找不到 $tool（请安装 Debian 的 samba、samba-ad-dc 和 smbclient）")"; exit 1; }
  done
}

on_lo() { ip -4 -o addr show dev lo | grep -qF " $1/"; }

# A loopback address no interface has and nothing listens on, added to `lo` under the lock.
claim_address() {
  local wanted=${1:-} n a
  exec 9>"$LOCK"
  flock 9
  for n in $(seq 20 250); do
    a=127.0.0.$n
    if [ -n "$wanted" ] && [ "$a" != "$wanted" ]; then continue; fi
    on_lo "$a" && continue
    [ -z "$(ss -Hltun "src $a" 2>/dev/null)" ] || continue
    ip addr add "$a/32" dev lo
    flock -u 9
    echo "$a"
    return 0
  done
  flock -u 9
  log "$(say2 "error: no free loopback address in 127.0.0.20-250${wanted:+ (asked for $wanted)}" "错误：127.0.0.20-250 中没有空闲的回环地址${wanted:+（要求的是 $wanted）}")"
  return 1
}

# Every process of the DC: samba daemonizes into a session of its own, its workers inside it.
stop_dc() {  # dir
  local dir=$1 pid sid pids
  pid=$(cat "$dir/pid/samba.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && sid=$(ps -o sid= -p "$pid" 2>/dev/null) && [ "$(echo "$sid")" = "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      pids=$(pgrep -s "$pid" || true)
      [ -z "$pids" ] && break
      sleep 0.1
    done
    pids=$(pgrep -s "$pid" || true)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  fi
  # smbd and winbindd (and smbd's child per client connection) are sessions of their own:
  # found by the configuration file their command line names.
  end_processes_under "$dir"
  rm -f "$dir"/pid/*.pid
}

forget() {  # dir address
  stop_dc "$1"
  if on_lo "$2"; then ip addr del "$2/32" dev lo 2>/dev/null || true; fi
  rm -rf "$1"
}

write_tls() {  # dir address
  local t=$1/tls
  mkdir -p "$t"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=retrieval-svc test AD CA" \
    -keyout "$t/ca.key" -out "$t/ca.pem" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$HOST.${REALM,,}" \
    -keyout "$t/key.pem" -out "$t/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:%s,DNS:%s.%s,DNS:%s\n' "$2" "$HOST" "${REALM,,}" "${REALM,,}" \
    >"$t/san.ext"
  openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" \
    -CAcreateserial -days 2 -extfile "$t/san.ext" -out "$t/cert.pem" >/dev/null 2>&1
  chmod 600 "$t/key.pem" "$t/ca.key"
}

write_conf() {  # dir address winbindd_socket_dir
  local d=$1
  cat >"$d/etc/smb.conf" <<CONF
[global]
	netbios name = ${HOST^^}
	realm = $REALM
	workgroup = $DOMAIN
	server role = active directory domain controller
	server services = s3fs, rpc, ldap, cldap, kdc, drepl, winbindd, kcc
	interfaces = $2
	bind interfaces only = yes
	disable netbios = yes
	smb ports = 445
	private dir = $d/private
	binddns dir = $d/bind-dns
	lock directory = $d/lock
	state directory = $d/state
	cache directory = $d/cache
	pid directory = $d/pid
	ncalrpc dir = $d/run/ncalrpc
	ntp signd socket directory = $d/run/ntp_signd
	winbindd socket directory = $3
	log file = $d/log/%m.log
	logging = file
	max log size = 10000
	load printers = no
	printing = bsd
	printcap name = /dev/null
	tls enabled = yes
	tls keyfile = $d/tls/key.pem
	tls certfile = $d/tls/cert.pem
	tls cafile = $d/tls/ca.pem
	# Simple binds over plain LDAP too (tests of the sync's ldap:// and StartTLS paths).
	ldap server require strong auth = no
	idmap_ldb:use rfc2307 = yes

[sysvol]
	path = $d/state/sysvol
	read only = no

[netlogon]
	path = $d/state/sysvol/${REALM,,}/scripts
	read only = no

[$SHARE]
	path = $d/share
	read only = no
	vfs objects = dfs_samba4 acl_xattr
	# Windows semantics: the NT ACL in the xattr decides, not the POSIX mode bits.
	acl_xattr:ignore system acls = yes
	nt acl support = yes

[$SHARE2]
	path = $d/share2
	read only = no
	vfs objects = dfs_samba4 acl_xattr
	acl_xattr:ignore system acls = yes
	nt acl support = yes

[$SHARE3]
	path = $d/share3
	read only = no
	# A DFS root: a symbolic link whose target is 'msdfs:server\\share' is a DFS link.
	msdfs root = yes
	vfs objects = acl_xattr
	acl_xattr:ignore system acls = yes
	nt acl support = yes
CONF
}

wait_ready() {  # dir address
  local d=$1 a=$2 port ok
  for _ in $(seq 1 600); do
    ok=1
    for port in 389 636 88 445; do
      (exec 3<>"/dev/tcp/$a/$port") 2>/dev/null || { ok=0; break; }
    done
    [ "$ok" = 1 ] && break
    kill -0 "$(cat "$d/pid/samba.pid" 2>/dev/null || echo 0)" 2>/dev/null ||
      { log "$(say2 "error: samba exited while starting; its log:" "错误：samba 在启动时退出；它的日志：")"; tail -n 30 "$d/log/samba.log" >&2 || true; return 1; }
    sleep 0.2
  done
  [ "$ok" = 1 ] || { log "$(say2 "error: the DC did not listen on $a (389, 636, 88, 445)" "错误：DC 没有在 $a 上监听（389、636、88、445）")"; return 1; }
  # A session needs winbindd too: wait until the administrator can list the share.
  for _ in $(seq 1 300); do
    if smbclient -s "$d/etc/smb.conf" "//$a/$SHARE" -U "Administrator%$ADMIN_PASSWORD" \
      -c ls >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  log "$(say2 "error: an SMB session to //$a/$SHARE failed; smbd's log:" "错误：到 //$a/$SHARE 的 SMB 会话失败；smbd 的日志：")"
  tail -n 30 "$d/log/smbd.log" >&2 || true
  return 1
}

run_samba() {  # dir private_run
  if [ "$2" = 1 ]; then
    unshare -m --propagation private sh -c \
      'mount --bind "$1/run-samba" /run/samba && exec samba -s "$1/etc/smb.conf" -D' sh "$1"
  else
    samba -s "$1/etc/smb.conf" -D
  fi
}

cmd=${1:-}
source "$(dirname "${BASH_SOURCE[0]}")/_servers.sh"
server_commands "$cmd"

case "$cmd" in
  start)
    ensure_samba
    [ "$(id -u)" = 0 ] ||
      { log "$(say2 "error: needs root (an address on lo, a mount namespace, Samba as a DC)" "错误：需要 root（lo 上的地址、挂载命名空间、作为 DC 的 Samba）")"; exit 1; }
    mkdir -p "$BASE"
    chmod 755 "$BASE"
    address=$(claim_address "${2:-}")
    dir=$BASE/$address
    done_ok=0
    trap '[ "$done_ok" = 1 ] || { log "$(say2 "start failed: removing $address and $dir" "启动失败：删除 $address 和 $dir")"; forget "$dir" "$address"; }' EXIT
    rm -rf "$dir"
    mkdir -p "$dir"/{etc,private,bind-dns,lock,state,cache,pid,run,log,share,share2,share3,run-samba}
    chmod 755 "$dir"
    # A mount namespace of its own where /run/samba is run-samba/, so smbd finds this
    # instance's winbindd; else the machine's, which only one DC may hold.
    mkdir -p /run/samba
    if unshare -m --propagation private true 2>/dev/null; then
      private_run=1
      socket_dir=/run/samba/winbindd
    else
      private_run=0
      socket_dir=/run/samba/winbindd
      if [ -S "$socket_dir/pipe" ]; then
        holder=$(ss -Hxlp 2>/dev/null | grep -F "$socket_dir/pipe" | grep -o 'users:.*' || true)
        log "$(say2 "error: cannot make a mount namespace here, and $socket_dir/pipe is held (${holder:-a stale socket: remove it if no winbindd runs}); one DC per machine" \
          "错误：这里无法创建挂载命名空间，而 $socket_dir/pipe 已被占用（${holder:-一个残留的套接字：如果没有 winbindd 在运行就删除它}）；每台机器只能有一个 DC")"
        false
      fi
    fi
    started=$(date +%s.%N)
    samba-tool domain provision --realm="$REALM" --domain="$DOMAIN" --host-name="$HOST" \
      --server-role=dc --dns-backend=NONE --use-rfc2307 --adminpass="$ADMIN_PASSWORD" \
      --targetdir="$dir" --option="interfaces = $address" --option="bind interfaces only = yes" \
      --option="lock directory = $dir/lock" --option="state directory = $dir/state" \
      --option="cache directory = $dir/cache" --option="pid directory = $dir/pid" \
      --option="private dir = $dir/private" --option="binddns dir = $dir/bind-dns" \
      >"$dir/log/provision.log" 2>&1 ||
      { log "$(say2 "error: provisioning failed; its log:" "错误：provision 失败；它的日志：")"; tail -n 30 "$dir/log/provision.log" >&2; false; }
    provisioned=$(date +%s.%N)
    domain_sid=$(grep -o 'DOMAIN SID: *S-[0-9-]*' "$dir/log/provision.log" | grep -o 'S-.*')
    write_tls "$dir" "$address"
    write_conf "$dir" "$address" "$socket_dir"
    cat >"$dir/krb5.conf" <<KRB
[libdefaults]
	default_realm = $REALM
	dns_lookup_realm = false
	dns_lookup_kdc = false
[realms]
	$REALM = {
		kdc = $address
		admin_server = $address
	}
[domain_realm]
	.${REALM,,} = $REALM
	${REALM,,} = $REALM
KRB
    chmod 777 "$dir/share" "$dir/share2" "$dir/share3"
    run_samba "$dir" "$private_run"
    wait_ready "$dir" "$address"
    # The share's root as a file server's: administrators and the system full control,
    # authenticated users read, inherited by everything below unless a test says otherwise.
    smbcacls -s "$dir/etc/smb.conf" "//$address/$SHARE" "" -U "Administrator%$ADMIN_PASSWORD" \
      --set "ACL:BUILTIN\\Administrators:ALLOWED/OI|CI/FULL,ACL:NT AUTHORITY\\SYSTEM:ALLOWED/OI|CI/FULL,ACL:NT AUTHORITY\\Authenticated Users:ALLOWED/OI|CI/READ" \
      >/dev/null
    smbcacls -s "$dir/etc/smb.conf" "//$address/$SHARE2" "" -U "Administrator%$ADMIN_PASSWORD" \
      --set "ACL:BUILTIN\\Administrators:ALLOWED/OI|CI/FULL,ACL:NT AUTHORITY\\SYSTEM:ALLOWED/OI|CI/FULL,ACL:NT AUTHORITY\\Authenticated Users:ALLOWED/OI|CI/READ" \
      >/dev/null
    smbcacls -s "$dir/etc/smb.conf" "//$address/$SHARE3" "" -U "Administrator%$ADMIN_PASSWORD" \
      --set "ACL:BUILTIN\\Administrators:ALLOWED/OI|CI/FULL,ACL:NT AUTHORITY\\SYSTEM:ALLOWED/OI|CI/FULL,ACL:NT AUTHORITY\\Authenticated Users:ALLOWED/OI|CI/READ" \
      >/dev/null
    ready=$(date +%s.%N)
    done_ok=1
    cat >"$dir/dc.env" <<ENV
SAMBA_AD_ADDRESS=$address
SAMBA_AD_DIR=$dir
SAMBA_AD_REALM=$REALM
SAMBA_AD_DOMAIN=$DOMAIN
SAMBA_AD_DOMAIN_SID=$domain_sid
SAMBA_AD_BASE_DN=$BASE_DN
SAMBA_AD_HOST=$HOST.${REALM,,}
SAMBA_AD_LDAP_URL=ldap://$address
SAMBA_AD_LDAPS_URL=ldaps://$address
SAMBA_AD_CA=$dir/tls/ca.pem
SAMBA_AD_ADMIN=Administrator
SAMBA_AD_ADMIN_DN=CN=Administrator,CN=Users,$BASE_DN
SAMBA_AD_ADMIN_PASSWORD=$ADMIN_PASSWORD
SAMBA_AD_SHARE=$SHARE
SAMBA_AD_SHARE_PATH=$dir/share
SAMBA_AD_SHARE2=$SHARE2
SAMBA_AD_SHARE3=$SHARE3
SAMBA_AD_SHARE3_PATH=$dir/share3
SAMBA_AD_SMB_CONF=$dir/etc/smb.conf
SAMBA_AD_KRB5_CONFIG=$dir/krb5.conf
SAMBA_AD_PRIVATE_RUN=$private_run
SAMBA_AD_PROVISION_SECONDS=$(awk "BEGIN { printf \"%.1f\", $provisioned - $started }")
SAMBA_AD_START_SECONDS=$(awk "BEGIN { printf \"%.1f\", $ready - $provisioned }")
ENV
    cat "$dir/dc.env"
    ;;
  stop)
    address=${2:-}
    [[ "$address" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
      { say2 "usage: scripts/samba-ad.sh stop ADDRESS" "用法：scripts/samba-ad.sh stop ADDRESS" >&2; exit 2; }
    exec 9>"$LOCK"
    flock 9
    forget "$BASE/$address" "$address"
    ;;
  halt|resume)
    address=${2:-}
    [[ "$address" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] && [ -f "$BASE/$address/dc.env" ] ||
      { say2 "usage: scripts/samba-ad.sh $cmd ADDRESS (a DC this script started)" "用法：scripts/samba-ad.sh $cmd ADDRESS（本脚本启动的 DC）" >&2; exit 2; }
    dir=$BASE/$address
    if [ "$cmd" = halt ]; then
      stop_dc "$dir"
    else
      pid=$(cat "$dir/pid/samba.pid" 2>/dev/null || true)
      if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        rm -f "$dir"/pid/*.pid
        run_samba "$dir" "$(sed -n 's/^SAMBA_AD_PRIVATE_RUN=//p' "$dir/dc.env")"
      fi
      wait_ready "$dir" "$address"
    fi
    ;;
  status)
    for d in "$BASE"/*/; do
      [ -f "$d/dc.env" ] || [ -d "$d/pid" ] || continue
      a=$(basename "$d")
      pid=$(cat "$d/pid/samba.pid" 2>/dev/null || true)
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then state=running; else state=stopped; fi
      echo "$a $state $d"
    done
    ;;
  *)
    say2 "usage: scripts/samba-ad.sh start [ADDRESS] | stop ADDRESS | halt ADDRESS | resume ADDRESS | stop-all | status | --help" "用法：scripts/samba-ad.sh start [ADDRESS] | stop ADDRESS | halt ADDRESS | resume ADDRESS | stop-all | status | --help" >&2
    exit 2
    ;;
esac
