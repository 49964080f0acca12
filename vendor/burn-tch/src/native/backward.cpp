// LibTorch's own backward kernels that tch 0.22 does not bind: convolution's
// and batch normalisation's.
#include <ATen/ATen.h>
#include <array>
#include <cstring>
#include <exception>
#include <vector>

extern "C" {

// Gradients of a (non-transposed) convolution of `input` by `weight` given
// `grad_output`: out[0] for the input, out[1] for the weight, out[2] for the
// bias, each only where bit 0, 1 or 2 of `mask` is set (else an undefined
// tensor). Returns null, or an error message the caller frees with free().
char *burn_tch_convolution_backward(at::Tensor **out, const at::Tensor *grad_output,
                                    const at::Tensor *input, const at::Tensor *weight,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *dilation, int dims, int64_t groups,
                                    int mask) {
    try {
        std::vector<int64_t> output_padding(dims, 0);
        std::vector<int64_t> bias_sizes{weight->size(0)};
        std::array<bool, 3> output_mask{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
        auto grads = at::convolution_backward(
            *grad_output, *input, *weight,
            (mask & 4) ? at::OptionalIntArrayRef(bias_sizes) : at::OptionalIntArrayRef(),
            at::IntArrayRef(stride, dims), at::IntArrayRef(padding, dims),
            at::IntArrayRef(dilation, dims), false, output_padding, groups, output_mask);
        out[0] = new at::Tensor(std::get<0>(grads));
        out[1] = new at::Tensor(std::get<1>(grads));
        out[2] = new at::Tensor(std::get<2>(grads));
        return nullptr;
    } catch (const std::exception &e) {
        return strdup(e.what());
    }
}

// Gradients of a training-mode batch normalisation of `input` ([N, C, ...])
// scaled by `weight` ([C]), from the batch statistics its forward saved
// (`save_mean`, `save_invstd`): out[0] for the input, out[1] for the weight,
// out[2] for the bias. Returns null, or an error message the caller frees
// with free().
char *burn_tch_batch_norm_backward(at::Tensor **out, const at::Tensor *grad_output,
                                   const at::Tensor *input, const at::Tensor *weight,
                                   const at::Tensor *save_mean, const at::Tensor *save_invstd,
                                   double eps) {
    try {
        auto grads = at::native_batch_norm_backward(
            *grad_output, *input, *weight, std::nullopt, std::nullopt, *save_mean, *save_invstd,
            true, eps, {true, true, true});
        out[0] = new at::Tensor(std::get<0>(grads));
        out[1] = new at::Tensor(std::get<1>(grads));
        out[2] = new at::Tensor(std::get<2>(grads));
        return nullptr;
    } catch (const std::exception &e) {
        return strdup(e.what());
    }
}
}
