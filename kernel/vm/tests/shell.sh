# Ad-hoc: runs its arguments as a shell command line in the guest (lib.sh loaded), e.g.
#   kernel/vm/run.sh --module patched shell 'start_probe --align-order 20; dd ...; stop_probe'
. ./lib.sh
eval "$*"
