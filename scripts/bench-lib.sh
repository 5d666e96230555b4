# Shared by the benchmark scripts (sourced, not run).

# A free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# utime + stime of a process, in clock ticks (fields 14 and 15; the comm
# field may hold spaces, so count from its closing parenthesis).
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
hz=$(getconf CLK_TCK)
