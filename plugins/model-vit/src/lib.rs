//! Vision Transformer tiny/small/base/large as timm/torchvision, any patch size: the `vit` architecture of benchkit-zoo with its classifier head.

benchkit_zoo::classifier_plugin!(
    benchkit_zoo::vit::ARCH,
    "Vision Transformer tiny/small/base/large as timm/torchvision, any patch size"
);
