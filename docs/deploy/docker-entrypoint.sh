#!/bin/sh
# The container's entrypoint (under tini, which forwards signals and reaps
# orphans): `solidq supervisor` by default, or any solidq command given as
# the container's arguments (`docker run IMAGE queues`, `… check`). With
# SOLIDQ_MIGRATE=1 it runs `solidq migrate` first (on SOLIDQ_DATABASE_URL).
set -eu

config="${SOLIDQ_CONFIG:-/etc/solidq/solidq.toml}"

if [ "$#" -eq 0 ]; then
    set -- supervisor
fi

if [ "${SOLIDQ_MIGRATE:-0}" = "1" ]; then
    solidq migrate
fi

case "$1" in
    supervisor | check)
        command="$1"
        shift
        set -- "$command" --config "$config" "$@"
        ;;
esac

# exec: solidq replaces the shell, so the SIGTERM of `docker stop` reaches it.
exec solidq "$@"
