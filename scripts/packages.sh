#!/usr/bin/env bash
# cairn_ensure_packages PKG...: installs the Debian packages of the list that
# are missing. As root: apt-get update once, then apt-get install (nothing
# when everything is installed). As another user: lists the missing packages,
# with the command to install them, and returns 1. Without dpkg-query (not
# Debian): says what is needed and returns 0. Sourced by setup.sh and
# test-mpich.sh.

cairn_ensure_packages() {
    local missing=() pkg status
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "${0##*/}: no dpkg-query (not Debian?): not checking packages; need: $*" >&2
        return 0
    fi
    for pkg in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
        case $status in
            ii*) ;;
            *) missing+=("$pkg") ;;
        esac
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    if [ "$(id -u)" -eq 0 ]; then
        echo "${0##*/}: installing ${missing[*]}"
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
    else
        echo "${0##*/}: missing packages: ${missing[*]}" >&2
        echo "${0##*/}: install them as root:" >&2
        echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
        return 1
    fi
}
