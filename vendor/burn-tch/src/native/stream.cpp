// The work queued so far on a CUDA device's current stream, waited for
// alone: other streams (a collective's) keep running, where a device
// synchronisation would wait for them too. Through c10's device-generic
// event, so that neither CUDA's headers nor its runtime are needed here.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <cstring>
#include <exception>

extern "C" char *burn_tch_cuda_stream_wait(int device) {
    try {
        c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
        c10::Device d(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
        c10::Event done(c10::DeviceType::CUDA);
        done.record(cuda.getStream(d));
        done.synchronize();
        return nullptr;
    } catch (const c10::Error &e) {
        return strdup(e.what_without_backtrace());
    } catch (const std::exception &e) {
        return strdup(e.what());
    }
}
