#!/usr/bin/env bash
# One benchkit config across hosts with Open MPI's mpirun (MPICH's and Intel
# MPI's mpirun take the same shape, with -genv for -x). benchkit reads its
# rank and world size from OMPI_COMM_WORLD_RANK / _SIZE (or PMI_RANK /
# PMI_SIZE), its rank on the host from OMPI_COMM_WORLD_LOCAL_RANK (or
# MPI_LOCALRANKID); MASTER_ADDR names the host of rank 0, the first in the
# host file. MPI itself carries nothing: the processes meet over TCP.
#   deploy/mpirun.sh hosts.txt configs/studies/scaling-gpu.toml
# where hosts.txt lists one host per line with its slots, e.g. `gpu01 slots=1`.
set -euo pipefail
hosts="${1:?usage: deploy/mpirun.sh HOSTFILE CONFIG}"
config="${2:?usage: deploy/mpirun.sh HOSTFILE CONFIG}"
ranks="$(awk '!/^#/ && NF { n += ($2 ~ /^slots=/ ? substr($2, 7) : 1) } END { print n }' "$hosts")"
first="$(awk '!/^#/ && NF { print $1; exit }' "$hosts")"
exec mpirun -np "$ranks" --hostfile "$hosts" --map-by slot \
    -x MASTER_ADDR="$first" -x MASTER_PORT="${MASTER_PORT:-29500}" -x PATH \
    bash -c 'exec benchkit run "$0" -o "results/mpi/rank-${OMPI_COMM_WORLD_RANK:-$PMI_RANK}"' "$config"
