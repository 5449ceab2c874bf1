#!/bin/sh
# The --no_python worker of the re-enacted launcher tests: a file named after the global rank.
touch "$1/$RANK"
