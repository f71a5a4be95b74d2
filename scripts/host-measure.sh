# Sourced by the scripts that measure this host (timeslice-decay.sh,
# timeslice-coldstart.sh): `host_measure_setup` makes `out`, a temporary file removed at
# exit, and with PAUSE_PID set stops that process (SIGSTOP) until exit, so that a
# simulation batch does not load the other CPU during the measurement.
host_measure_setup() {
  out=$(mktemp)
  if [ -n "${PAUSE_PID:-}" ]; then
    kill -STOP "$PAUSE_PID"
  fi
  trap 'rm -f "$out"; if [ -n "${PAUSE_PID:-}" ]; then kill -CONT "$PAUSE_PID"; fi' EXIT
}
