// NCCL through PyTorch's own c10d: a TCPStore where the ranks meet, a
// ProcessGroupNCCL over it, and sum all-reduces of CUDA tensors the caller
// owns, in place, returning a work handle.
//
// Waiting is done here, not by c10d's blocking wait: with
// TORCH_NCCL_BLOCKING_WAIT, c10d polls the work with a sleep of a
// millisecond or more between looks, so every timed all-reduce would cost
// at least that. Instead a side stream is made to wait for the work (c10d's
// non-blocking wait, which holds back only the stream current at the call),
// an event is recorded on it, and the event is polled without sleeping, as
// nccl-tests polls its stream, until it completes or the group's timeout
// passes (a lost peer is then an error, and the communicator is aborted).
// The group keeps c10d's timing events (TORCH_NCCL_ENABLE_TIMING), so a
// finished work also says how long the collective ran on its stream.
// Every function returns null on success or an error message the caller
// frees with free().
#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

struct burn_tch_nccl {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::ProcessGroupNCCL> group;
    int64_t timeout_ms;
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

// Block until `work` is done on `device`, polling an event without sleep,
// at most `timeout_ms`; then the collective's own milliseconds on its
// stream into `device_ms` (NaN where c10d kept no timing events).
static void await_work(c10d::Work &work, const at::Device &device, int64_t timeout_ms, float *device_ms) {
    c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
    c10::Stream side = cuda.getStreamFromGlobalPool(device);
    c10::Stream previous = cuda.exchangeStream(side);
    c10::Event done(c10::DeviceType::CUDA);
    try {
        work.wait();
        done.record(side);
    } catch (...) {
        cuda.exchangeStream(previous);
        throw;
    }
    cuda.exchangeStream(previous);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done.query()) {
        if (std::chrono::steady_clock::now() > deadline) {
            work.abort();
            throw std::runtime_error("no answer from a peer within " + std::to_string(timeout_ms / 1000) +
                                     " s: the NCCL communicator was aborted");
        }
        std::this_thread::yield();
    }
    if (device_ms != nullptr) {
        *device_ms = NAN;
        try {
            *device_ms = work.getDuration();
        } catch (const std::exception &) {
        }
    }
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
        // Waits poll here (await_work), whatever the environment says, and
        // time out with a structured error; c10d's watchdog only reports,
        // unless the user asked it for more.
        setenv("TORCH_NCCL_BLOCKING_WAIT", "0", 1);
        setenv("TORCH_NCCL_ENABLE_TIMING", "1", 1);
        setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", 0);
        auto nccl = c10d::ProcessGroupNCCL::Options::create();
        nccl->timeout = std::chrono::milliseconds(timeout_ms);
        auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, nccl);
        *out = new burn_tch_nccl{store, group, timeout_ms};
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

// Wait until `w`'s sum is on the device, at most the group's timeout, and
// free it; `device_ms` receives the collective's milliseconds on its
// stream (NaN where unknown).
char *burn_tch_nccl_wait(burn_tch_nccl_work *w, burn_tch_nccl *g, float *device_ms) {
    char *error = nullptr;
    try {
        await_work(*w->work, w->tensors.front().device(), g->timeout_ms, device_ms);
    } catch (const std::exception &e) {
        error = nccl_error_of(e);
    }
    delete w;
    return error;
}

// Sum `tensor` across the ranks `n` times, in place, the all-reduces queued
// back to back on the collective's stream, as nccl-tests times them; return
// once the last is done on the device.
char *burn_tch_nccl_all_reduce_n(burn_tch_nccl *g, const at::Tensor *tensor, int64_t n) {
    try {
        if (!tensor->is_cuda()) {
            return strdup("NCCL sums tensors on CUDA devices only");
        }
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        std::vector<at::Tensor> tensors{*tensor};
        for (int64_t i = 0; i < n; i++) {
            works.push_back(g->group->allreduce(tensors));
        }
        // One stream runs them in order: the last one done is every one done.
        if (!works.empty()) {
            await_work(*works.back(), tensor->device(), g->timeout_ms, nullptr);
        }
        return nullptr;
    } catch (const std::exception &e) {
        return nccl_error_of(e);
    }
}
}
