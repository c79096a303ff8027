#!/usr/bin/env bash
# Writes ferry(1) in troff to stdout, from the binary's own help: `ferry help` for the synopsis
# and the command list, `ferry help CMD` for each command's section, so the man page never
# disagrees with the program.   scripts/manpage.sh path/to/ferry > ferry.1
set -euo pipefail
bin=$1
version=$("$bin" version | awk '{print $NF}')
# troff: a backslash is \e; a line starting with . or ' is protected with \&
esc() { sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\&'/"; }
printf '.TH FERRY 1 "%s" "ferry %s" "User Commands"\n' "$(date -u +%Y-%m-%d)" "$version"
printf '.SH NAME\nferry \\- rebalance multi-tenant ClickHouse clusters without rewriting data\n'
printf '.SH SYNOPSIS\n.B ferry\n.I command\n.RI [ options ]\n.SH DESCRIPTION\n.nf\n'
"$bin" help | esc
printf '.fi\n.SH COMMANDS\n'
for c in $("$bin" help | awk '/^commands:/{f=1; next} f && !NF {exit} f {print $1}'); do
    printf '.SS %s\n.nf\n' "$c"
    "$bin" help "$c" 2>&1 | esc
    printf '.fi\n'
done
printf '.SH EXIT STATUS\n0 on success, 2 for bad input (the message names the file and line or the\n'
printf 'option), 1 for any other failure.\n.SH FILES\n.TP\n.I /etc/ferry/ferry.conf\n'
printf "the cluster's configuration (an annotated example: share/doc/ferry/ferry.conf.example)\n"
printf '.SH SEE ALSO\nThe documentation in share/doc/ferry.\n'
