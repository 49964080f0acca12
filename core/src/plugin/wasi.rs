//! The WASI a plugin may use, and nothing more. Guests link against the
//! whole of WASI 0.2 (Rust's standard library imports most of it), but the
//! context grants no preopened directory, network, environment or real
//! clock, and every function that would create a handle to the outside
//! (a directory, a socket, a name lookup) or a timer is replaced by a trap
//! that names itself. What remains (empty streams, frozen clocks,
//! deterministic randomness) cannot block the calling thread, so the call
//! deadline always holds. Imports outside WASI and the benchkit contract
//! are linked as the same naming traps.

use super::sandbox::State;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, ResourceType};
use wasmtime::Engine;

/// The WASI release the granted interfaces are linked as (newer and older
/// 0.2 guests match it by semver).
const WASI_VERSION: &str = "0.2.12";

/// Functions that would hand a guest something outside the sandbox or let
/// it wait on a timer.
const DENIED: &[(&str, &[&str])] = &[
    ("wasi:clocks/monotonic-clock", &["subscribe-duration", "subscribe-instant"]),
    ("wasi:filesystem/preopens", &["get-directories"]),
    ("wasi:sockets/instance-network", &["instance-network"]),
    ("wasi:sockets/tcp-create-socket", &["create-tcp-socket"]),
    ("wasi:sockets/udp-create-socket", &["create-udp-socket"]),
    ("wasi:sockets/ip-name-lookup", &["resolve-addresses"]),
];

/// The error a denied import traps with.
#[derive(Debug)]
pub struct Denied(pub String);

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "benchkit grants plugins no `{}`", self.0)
    }
}

impl std::error::Error for Denied {}

/// The import a trap came from, if it was a denied one.
pub fn denied_import(error: &wasmtime::Error) -> Option<String> {
    error.downcast_ref::<Denied>().map(|Denied(name)| name.clone())
}

/// Link WASI with its capability-creating functions replaced by traps.
pub fn add_granted(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    for (interface, functions) in DENIED {
        let mut instance = linker.instance(&format!("{interface}@{WASI_VERSION}"))?;
        for function in *functions {
            let name = format!("{interface}#{function}");
            instance.func_new(function, move |_, _, _, _| Err(Denied(name.clone()).into()))?;
        }
    }
    linker.allow_shadowing(false);
    Ok(())
}

/// A resource type for the resources of stubbed imports; no value of it is
/// ever made.
struct Stubbed;

/// Link every import of `component` outside WASI and the benchkit contract
/// as a trap naming it, so a component may declare what it likes but only
/// ever call what is granted.
pub fn stub_unknown(
    linker: &mut Linker<State>,
    engine: &Engine,
    component: &Component,
) -> wasmtime::Result<()> {
    let ty = component.component_type();
    for (name, item) in ty.imports(engine) {
        if name.starts_with("wasi:") || name.starts_with("benchkit:plugin/") {
            continue;
        }
        match item.ty {
            ComponentItem::ComponentInstance(instance) => {
                let mut linked = linker.instance(name)?;
                for (export, item) in instance.exports(engine) {
                    match item.ty {
                        ComponentItem::ComponentFunc(_) => {
                            let full = format!("{name}#{export}");
                            linked.func_new(export, move |_, _, _, _| Err(Denied(full.clone()).into()))?;
                        }
                        ComponentItem::Resource(_) => {
                            linked.resource(export, ResourceType::host::<Stubbed>(), |_, _| Ok(()))?;
                        }
                        _ => {}
                    }
                }
            }
            ComponentItem::ComponentFunc(_) => {
                let full = name.to_string();
                linker.root().func_new(name, move |_, _, _, _| Err(Denied(full.clone()).into()))?;
            }
            _ => {}
        }
    }
    Ok(())
}
