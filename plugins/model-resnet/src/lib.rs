//! ResNet-18/34/50/101/152 as torchvision, ImageNet or CIFAR stem: the `resnet` architecture of benchkit-zoo with its classifier head.

benchkit_zoo::classifier_plugin!(
    benchkit_zoo::resnet::ARCH,
    "ResNet-18/34/50/101/152 as torchvision, ImageNet or CIFAR stem"
);
