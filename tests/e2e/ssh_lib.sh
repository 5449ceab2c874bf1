# Test hosts reached by ssh (sourced after lib.sh): a bridge in the root namespace and one network
# namespace per host on it, each running Debian's real OpenSSH server with a host key and an
# authorized client key made here. The namespaces share the file system, so every host sees the
# same npu_run, scripts and keys, as on a cluster with a shared home directory.
#
# make_ssh_hosts TAG PREFIX N DIR: hosts PREFIX.1 .. PREFIX.N (root namespace: PREFIX.254), each
# namespace's end of its veth named differently (host i: eth<i-1>, as on servers whose NICs were
# named apart), and every host's name (all share this machine's) resolving to 127.0.1.1, as
# Debian's own /etc/hosts has it: the sshd of each host sees a hosts file of its own. Gloo, NCCL
# and HCCL then pick no reachable address by themselves, nor can one GLOO_SOCKET_IFNAME serve
# every host. sshd listens in namespaces 1..N only when told: SSHD_HOSTS (default all) lists
# which run one. Sets ssh_options (an array of npu_run options) for the client key.
# remove_ssh_hosts undoes everything.

make_ssh_hosts() {  # tag prefix count dir
  ssh_tag=$1 ssh_prefix=$2 ssh_count=$3 ssh_dir=$4
  local i ns
  sweep_stale_runs "$ssh_tag"
  mkdir -p /run/sshd "$ssh_dir"
  chmod 700 "$ssh_dir"
  ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/host_key" </dev/null
  ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/client_key" </dev/null
  cp "$ssh_dir/client_key.pub" "$ssh_dir/authorized_keys"
  printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" >"$ssh_dir/hosts"
  ip link add "${ssh_tag}br" type bridge
  ip addr add "$ssh_prefix.254/24" dev "${ssh_tag}br"
  ip link set "${ssh_tag}br" up
  for i in $(seq 1 "$ssh_count"); do
    ns="${ssh_tag}h$i"
    ip netns add "$ns"
    ip link add "${ssh_tag}v$i" type veth peer name "${ssh_tag}p$i"
    ip link set "${ssh_tag}p$i" netns "$ns"
    ip -n "$ns" link set "${ssh_tag}p$i" name "eth$((i - 1))"
    ip -n "$ns" addr add "$ssh_prefix.$i/24" dev "eth$((i - 1))"
    ip -n "$ns" link set "eth$((i - 1))" up
    ip -n "$ns" link set lo up
    ip link set "${ssh_tag}v$i" master "${ssh_tag}br"
    ip link set "${ssh_tag}v$i" up
    case " ${SSHD_HOSTS:-$(seq -s ' ' 1 "$ssh_count")} " in
      *" $i "*) start_sshd "$ns" "$ssh_prefix.$i" "$ssh_dir/sshd$i" ;;
    esac
  done
  ssh_options=(--ssh-option "IdentityFile=$ssh_dir/client_key"
               --ssh-option StrictHostKeyChecking=no --ssh-option UserKnownHostsFile=/dev/null
               --ssh-option "SetEnv=NPU_RUN_TEST_MARKER=$marker")
}

start_sshd() {  # namespace address file-prefix
  cat >"$3.conf" <<EOF
ListenAddress $2
HostKey $ssh_dir/host_key
AuthorizedKeysFile $ssh_dir/authorized_keys
PidFile $3.pid
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AcceptEnv NPU_RUN_TEST_MARKER
MaxStartups 200:30:400
MaxSessions 200
LogLevel ERROR
EOF
  # A mount namespace of its own for the host's /etc/hosts; sshd forks into the background and
  # keeps it, and so does every session it starts.
  ip netns exec "$1" unshare --mount --propagation private \
    sh -c 'mount --bind "$1" /etc/hosts && exec /usr/sbin/sshd -f "$2" -E "$3"' sh \
    "$ssh_dir/hosts" "$3.conf" "$3.log"
  local deadline=$((SECONDS + 10))
  until [ -s "$3.pid" ]; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "sshd in $1 did not start" >&2; cat "$3.log" >&2; return 1; }
    sleep 0.05
  done
}

remove_ssh_hosts() {
  local i pid
  for i in $(seq 1 "${ssh_count:-0}"); do
    if [ -s "$ssh_dir/sshd$i.pid" ]; then
      pid=$(cat "$ssh_dir/sshd$i.pid")
      kill "$pid" 2>/dev/null || true
    fi
    ip netns del "${ssh_tag}h$i" 2>/dev/null || true
    ip link del "${ssh_tag}v$i" 2>/dev/null || true
  done
  ip link del "${ssh_tag}br" 2>/dev/null || true
}

# The job's processes on every host: workers and host-agents carry the marker (the host-agents
# through ssh's SetEnv, which the test's sshd accepts).
