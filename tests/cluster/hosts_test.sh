#!/usr/bin/env bash
# Checks tests/cluster/hosts.sh: brings up hosts h1 and h2, checks that they are
# separate hosts (hostname, /tmp, names, no way out), runs 4 MPI ranks on
# h1:2,h2:2 and checks where they ran and that bytes crossed the bridge, checks
# that a host that is not up fails mpirun quickly, and that `down` leaves nothing.
# Exits 0 when all pass, 1 when one fails, 77 (skipped) where namespaces or
# Open MPI are not available. The cluster is always torn down (trap).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/test_lib.sh
source "$here/test_lib.sh"
hosts=$here/hosts.sh
for tool in mpicc mpirun; do
  command -v $tool >/dev/null || { echo "hosts_test: SKIP: no $tool"; exit 77; }
done

# DIR is shared by the hosts, so it must not be under /tmp (each has its own).
dir=$(shared_temp_dir hosts_test)
trap 'cd /; "$hosts" down "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
export HOSTS_DIR=$dir
cd "$dir" || exit 1  # a folder every host sees (ctest may start us anywhere)

"$hosts" up 2 "$dir"
rc=$?
if ((rc == 77)); then echo "hosts_test: SKIP"; exit 77; fi
((rc == 0)) || { echo "hosts_test: hosts.sh up failed ($rc)"; exit 1; }


# --- the hosts are separate machines, as far as a program can tell
separate_hosts() {
  [[ $("$hosts" run h1 hostname) == h1 && $("$hosts" run h2 hostname) == h2 ]] &&
    "$hosts" run h1 sh -c 'echo h1 >/tmp/mine' &&
    ! "$hosts" run h2 test -e /tmp/mine &&
    [[ $("$hosts" run h1 pwd) == "$PWD" ]] &&
    [[ $("$hosts" run h1 getent hosts h2) == 10.213.*" h2" ]] &&
    # No route but the bridge's subnet (checked without sending anything).
    [[ -z $("$hosts" run h1 ip route show default) ]] &&
    ! "$hosts" run h1 ip route get 192.0.2.1 >/dev/null 2>&1 &&
    # The root namespace has no address on the cluster's subnets.
    ! ip -4 -o addr show | grep -q ' 10\.213\.'
}
check "h1 and h2 have own hostname and /tmp, names resolve, no way out" separate_hosts

# --- 4 ranks on h1:2,h2:2: where they ran, and that their bytes crossed the bridge
mpicc -O1 -o "$dir/where" "$here/where.c" || { echo "hosts_test: mpicc failed"; exit 1; }
bytes() {  # bytes the switch's port to h2 received + sent
  ip -n "$("$hosts" netns switch)" -s link show h2 |
    awk '/RX:|TX:/ {getline; sum += $1} END {print sum}'
}
before=$(bytes)
out=$(timeout 60 "$hosts" mpirun --oversubscribe --host h1:2,h2:2 -np 4 ./where 2>&1)
rc=$?
after=$(bytes)
echo "$out"
expected="rank 0 size 4 host h1 local_rank 0 sum 10
rank 1 size 4 host h1 local_rank 1 sum 10
rank 2 size 4 host h2 local_rank 0 sum 10
rank 3 size 4 host h2 local_rank 1 sum 10"
check "mpirun -np 4 on h1:2,h2:2 runs ranks 2,3 on h2 (local ranks 0,1)" \
  test "$rc" = 0 -a "$(grep '^rank ' <<<"$out" | sort -n -k2)" = "$expected"
echo "bridge port h2: $before -> $after bytes"
check "bytes crossed the bridge to h2" test $((after - before)) -gt 1000

# --- a host that never joins: mpirun fails within seconds and names it
start=$SECONDS
out=$(timeout 60 "$hosts" mpirun --host h1,h3 -np 2 ./where 2>&1)
rc=$?
echo "mpirun with h3 (not up): exit $rc after $((SECONDS - start)) s; $(grep -m1 "h3" <<<"$out")"
check "a host that is not up fails mpirun quickly, naming it" \
  test "$rc" != 0 -a "$rc" != 124 -a $((SECONDS - start)) -lt 30 \
  -a -n "$(grep "no host 'h3'" <<<"$out")" -a -n "$(grep "unable to reliably start" <<<"$out")"

# --- down removes every namespace and process
mine=$("$hosts" netns switch)
mine=${mine%-sw}
"$hosts" down "$dir"
check "down leaves no namespace and no process" \
  test -z "$(ip netns list | grep "^$mine-")" -a ! -e "$dir/h1.pid"

echo "hosts_test: $passed passed, $failed failed"
((failed == 0))
