//! AlexNet as torchvision: the `alexnet` architecture of benchkit-zoo with its classifier head.

benchkit_zoo::classifier_plugin!(benchkit_zoo::alexnet::ARCH, "AlexNet as torchvision");
