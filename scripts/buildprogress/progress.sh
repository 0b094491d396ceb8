#!/usr/bin/env bash
# progress.sh reads a build's output (go build -v's, 2>&1, piped in) and passes it on, with the
# package names go build -v prints as it compiles each one counted instead of printed: a line at
# least every EVERY seconds (default 5) while packages compile, so a first build on a cold cache
# is not minutes of silence. Every other line (make's commands, go's downloads and errors)
# passes as it is. A warm build compiles nothing and prints nothing more.
every=${EVERY:-5}
n=0 last=$SECONDS partial=
count() {
	if [[ $1 =~ ^[A-Za-z0-9._~/+-]+$ ]]; then # a package's import path: no spaces, no colon
		n=$((n + 1))
		if ((SECONDS - last >= every)); then
			echo "  compiled $n packages (${SECONDS}s)"
			last=$SECONDS
		fi
	else
		printf '%s\n' "$1"
	fi
}
while :; do
	IFS= read -r -t "$every" line
	status=$?
	if ((status == 0)); then
		count "$partial$line"
		partial=
	elif ((status > 128)); then # nothing for EVERY seconds (a long package, the link); line is what came of the next
		partial+=$line
		echo "  still building: $n packages compiled so far (${SECONDS}s)"
		last=$SECONDS
	else # the end; line is a last line without its newline
		[[ -n $partial$line ]] && count "$partial$line"
		break
	fi
done
if ((n > 0)); then
	echo "  compiled $n packages in ${SECONDS}s"
fi
