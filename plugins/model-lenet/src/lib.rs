//! LeNet-5, the paper's tanh and average pooling or ReLU and max pooling: the `lenet` architecture of benchkit-zoo with its classifier head.

benchkit_zoo::classifier_plugin!(
    benchkit_zoo::lenet::ARCH,
    "LeNet-5, the paper's tanh and average pooling or ReLU and max pooling"
);
