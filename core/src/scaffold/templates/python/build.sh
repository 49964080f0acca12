#!/bin/sh
# Builds {{name}}.wasm from app.py against the contract in wit/. With
# --stub-wasi the component imports nothing but benchkit's interfaces:
# plugins are granted no file, clock, network or environment.
set -e
componentize-py -d wit -w {{world}} componentize app -o {{name}}.wasm --stub-wasi
