//! DenseNet-121/161/169/201 as torchvision, ImageNet or CIFAR stem: the `densenet` architecture of benchkit-zoo with its classifier head.

benchkit_zoo::classifier_plugin!(
    benchkit_zoo::densenet::ARCH,
    "DenseNet-121/161/169/201 as torchvision, ImageNet or CIFAR stem"
);
