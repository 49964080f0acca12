// NCCL through PyTorch's own c10d: a TCPStore where the ranks meet, a
// ProcessGroupNCCL over it, and sum all-reduces of CUDA tensors the caller
// owns, in place, returning a work handle. The group waits blocking
// (TORCH_NCCL_BLOCKING_WAIT): waiting for the work holds the calling thread
// until the sum is on the device, so that its time is the collective's,
// and a peer that never comes is an error after the timeout, not a hang.
// Every function returns null on success or an error message the caller
// frees with free().
#include <ATen/ATen.h>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

struct burn_tch_nccl {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::ProcessGroupNCCL> group;
};

struct burn_tch_nccl_work {
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<at::Tensor> tensors;
};

// LibTorch's errors carry a C++ backtrace after the message; the message is enough.
static char *nccl_error_of(const std::exception &e) {
    if (auto c10 = dynamic_cast<const c10::Error *>(&e)) {
        return strdup(c10->what_without_backtrace());
    }
    return strdup(e.what());
}

extern "C" {

// Join the group of `size` ranks: rank 0 serves the store at
// `store_host:store_port`.
char *burn_tch_nccl_new(burn_tch_nccl **out, const char *store_host, int store_port, int rank,
                        int size, int64_t timeout_ms) {
    try {
        c10d::TCPStoreOptions options;
        options.port = static_cast<uint16_t>(store_port);
        options.isServer = rank == 0;
        options.numWorkers = size;
        options.timeout = std::chrono::milliseconds(timeout_ms);
        auto store = c10::make_intrusive<c10d::TCPStore>(std::string(store_host), options);
        setenv("TORCH_NCCL_BLOCKING_WAIT", "1", 1);
        auto nccl = c10d::ProcessGroupNCCL::Options::create();
        nccl->timeout = std::chrono::milliseconds(timeout_ms);
        auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, nccl);
        *out = new burn_tch_nccl{store, group};
        return nullptr;
    } catch (const std::exception &e) {
        return nccl_error_of(e);
    }
}

void burn_tch_nccl_free(burn_tch_nccl *g) { delete g; }

// Start summing `tensor` (contiguous, on a CUDA device) across the ranks,
// in place; it must stay alive until the work is waited for.
char *burn_tch_nccl_all_reduce(burn_tch_nccl_work **out, burn_tch_nccl *g,
                               const at::Tensor *tensor) {
    try {
        if (!tensor->is_cuda()) {
            return strdup("NCCL sums tensors on CUDA devices only");
        }
        std::vector<at::Tensor> tensors{*tensor};
        auto work = g->group->allreduce(tensors);
        *out = new burn_tch_nccl_work{work, tensors};
        return nullptr;
    } catch (const std::exception &e) {
        return nccl_error_of(e);
    }
}

// Wait until `w`'s sum is on the device, and free it.
char *burn_tch_nccl_wait(burn_tch_nccl_work *w) {
    char *error = nullptr;
    try {
        w->work->wait();
    } catch (const std::exception &e) {
        error = nccl_error_of(e);
    }
    delete w;
    return error;
}
}
