#!/bin/bash
# Submits a sharded `submem bench` sweep: checks the shard command's arguments
# here, then queues the array (bench-array.sbatch) and the merge
# (bench-merge.sbatch), which starts once every array task has succeeded.
#
#   RUN_DIR=/shared/runs/locomo DATA=/shared/data/locomo10.json deploy/slurm/submit.sh
#
# Extra arguments go to both sbatch calls (--account, --partition...).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${RUN_DIR:?set RUN_DIR to a directory every node sees}"
: "${DATA:?set DATA to the dataset file}"
mkdir -p "$RUN_DIR"

SLURM_ARRAY_TASK_ID=1 SUBMEM_CHECK=1 bash "$here/bench-array.sbatch"
array=$(sbatch --parsable --export=ALL "$@" "$here/bench-array.sbatch")
array=${array%%;*}
merge=$(sbatch --parsable --export=ALL --dependency="afterok:$array" "$@" "$here/bench-merge.sbatch")
echo "shards: job array $array; merge: job ${merge%%;*} (runs after every shard succeeds) into $RUN_DIR/merged"
