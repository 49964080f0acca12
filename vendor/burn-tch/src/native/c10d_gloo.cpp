// Gloo through PyTorch's own c10d: a TCPStore where the ranks meet, a
// ProcessGroupGloo over it, and sum all-reduces of f32 buffers the caller
// owns (wrapped without a copy), blocking or returning a work handle.
// ProcessGroupGloo's members are standard-library types and pointers to
// gloo's, so its layout here is LibTorch's whatever gloo's headers say.
// Every function returns null on success or an error message the caller
// frees with free().
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

struct burn_tch_gloo {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

struct burn_tch_gloo_work {
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<at::Tensor> tensors;
};

// LibTorch's errors carry a C++ backtrace after the message; the message is enough.
static char *error_of(const std::exception &e) {
    if (auto c10 = dynamic_cast<const c10::Error *>(&e)) {
        return strdup(c10->what_without_backtrace());
    }
    return strdup(e.what());
}

extern "C" {

// Join the group of `size` ranks: rank 0 serves the store at
// `store_host:store_port`; this rank's Gloo device listens on `host`.
char *burn_tch_gloo_new(burn_tch_gloo **out, const char *store_host, int store_port,
                        const char *host, int rank, int size, int64_t timeout_ms) {
    try {
        c10d::TCPStoreOptions options;
        options.port = static_cast<uint16_t>(store_port);
        options.isServer = rank == 0;
        options.numWorkers = size;
        options.timeout = std::chrono::milliseconds(timeout_ms);
        auto store = c10::make_intrusive<c10d::TCPStore>(std::string(store_host), options);
        auto gloo = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(timeout_ms));
        gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(std::string(host)));
        auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, gloo);
        *out = new burn_tch_gloo{store, group};
        return nullptr;
    } catch (const std::exception &e) {
        return error_of(e);
    }
}

void burn_tch_gloo_free(burn_tch_gloo *g) { delete g; }

// Start summing `count` f32 values at `data` across the ranks, in place;
// `data` must stay alive and untouched until the work is waited for.
char *burn_tch_gloo_all_reduce(burn_tch_gloo_work **out, burn_tch_gloo *g, float *data,
                               int64_t count) {
    try {
        std::vector<at::Tensor> tensors{at::from_blob(data, {count}, at::kFloat)};
        auto work = g->group->allreduce(tensors);
        *out = new burn_tch_gloo_work{work, tensors};
        return nullptr;
    } catch (const std::exception &e) {
        return error_of(e);
    }
}

// Wait for `w` to finish, and free it.
char *burn_tch_gloo_wait(burn_tch_gloo_work *w) {
    char *error = nullptr;
    try {
        w->work->wait();
    } catch (const std::exception &e) {
        error = error_of(e);
    }
    delete w;
    return error;
}
}
