// ember's data parallelism: process groups (init_process_group("mpi"), collectives, Work and
// Future), DistributedDataParallel, its communication hooks (fp16/bf16, PowerSGD), Join and
// SyncBatchNorm, ZeroRedundancyOptimizer (ZeRO stage 1, its step overlapped with DDP's backward
// through ZeroStepCommHook), and the trace of DDP's steps (distributed::Trace). Part of <ember/ember.h>.
#pragma once

#include "distributed/ddp/distributed_data_parallel.h"
#include "distributed/distributed.h"
#include "distributed/hooks/default_hooks.h"
#include "distributed/hooks/powersgd_hook.h"
#include "distributed/optim/zero_redundancy_optimizer.h"
#include "distributed/optim/zero_step_hook.h"
#include "distributed/sync_batch_norm.h"
#include "distributed/diagnostics/trace.h"
#include "ember/nn.h"
