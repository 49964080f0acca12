// LibTorch's fused optimizer kernels, which tch 0.22 does not bind.
#include <ATen/ATen.h>
#include <cstring>
#include <exception>
#include <vector>

extern "C" {

// One SGD step over `n` parameters in place, as torch.optim.SGD(fused=True)
// takes it: each gradient plus `weight_decay` times its parameter, folded
// into its momentum buffer (`momenta`, `n` of them, updated in place; null
// for plain SGD), the parameter moved by `lr` against the result (Nesterov's
// look-ahead where `nesterov` is set). Returns null, or an error message the
// caller frees with free().
char *burn_tch_fused_sgd(const at::Tensor *const *params, const at::Tensor *const *grads,
                         const at::Tensor *const *momenta, size_t n, double weight_decay,
                         double momentum, double lr, int nesterov) {
    try {
        std::vector<at::Tensor> p, g, m;
        p.reserve(n);
        g.reserve(n);
        for (size_t i = 0; i < n; i++) {
            p.push_back(*params[i]);
            g.push_back(*grads[i]);
            if (momenta != nullptr) {
                m.push_back(*momenta[i]);
            }
        }
        at::_fused_sgd_(p, g, m, weight_decay, momentum, lr, 0.0, nesterov != 0, false, false);
        return nullptr;
    } catch (const std::exception &e) {
        return strdup(e.what());
    }
}
}
