#!/bin/bash
# Records the real-data histories: one line per benchmark per commit.
# history <name>: commit specs "version" or "version+slow".
set -e
out=$1
load=$2
run() { # version flag
  ./hexbench-$1 $2
}
history() { # name, specs...
  local name=$1; shift
  local i=0
  for spec in "$@"; do
    v=${spec%+slow}; flag=""; [ "$spec" != "$v" ] && flag=--slow
    run $v $flag | while read bench samples; do
      echo "$load $name $i $spec $bench $samples" >> $out
    done
    i=$((i+1))
  done
}
rep() { for _ in $(seq $2); do echo $1; done; }
history versions $(rep 0.3.2 10) $(rep 0.4.0 10) $(rep 0.4.2 10) $(rep 0.4.3 10) $(rep 0.4.3+slow 10) $(rep 0.4.3 10)
history identical $(rep 0.4.3 30)
# Truth for the version boundaries: each pair interleaved 8 times.
for pair in "0.3.2 0.4.0" "0.4.0 0.4.2" "0.4.2 0.4.3"; do
  set -- $pair
  for k in 1 2 3 4 5 6 7 8; do
    run $1 | while read bench samples; do echo "$load truth-$1-$2 $k $1 $bench $samples" >> $out; done
    run $2 | while read bench samples; do echo "$load truth-$1-$2 $k $2 $bench $samples" >> $out; done
  done
done
