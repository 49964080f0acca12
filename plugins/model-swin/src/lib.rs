//! Swin Transformer T/S/B as torchvision, shifted windows with relative position bias: the `swin` architecture of benchkit-zoo with its classifier head.

benchkit_zoo::classifier_plugin!(
    benchkit_zoo::swin::ARCH,
    "Swin Transformer T/S/B as torchvision, shifted windows with relative position bias"
);
