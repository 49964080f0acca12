use super::*;

fn request(kind: PluginKind, lang: Lang, dir: &Path) -> Request {
    Request { kind, name: "my-plugin".into(), dir: dir.to_path_buf(), lang }
}

#[test]
fn names_are_checked_and_a_full_directory_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "My", "9lives", "a_b", "a-", "a b", &"a".repeat(65), "test", "match", "benchkit-pdk"] {
        let r = Request { name: bad.into(), ..request(PluginKind::Model, Lang::Rust, &dir.path().join("x")) };
        assert!(matches!(write(&r), Err(ScaffoldError::Name(_))), "{bad:?}");
    }
    std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
    let err = write(&request(PluginKind::Model, Lang::Rust, dir.path())).unwrap_err();
    assert!(matches!(err, ScaffoldError::NotEmpty(_)), "{err}");
    assert_eq!(std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(), "mine");
}

#[test]
fn every_kind_and_language_is_written_whole() {
    for lang in [Lang::Rust, Lang::Python, Lang::Js] {
        for kind in [PluginKind::Model, PluginKind::Transform, PluginKind::Reporter] {
            let dir = tempfile::tempdir().unwrap();
            let project = write(&request(kind, lang, dir.path())).unwrap();
            for file in &project.files {
                let text = std::fs::read_to_string(file).unwrap();
                for placeholder in ["{{name}}", "{{description}}", "{{contract}}", "{{schema}}", "{{world}}"]
                {
                    assert!(
                        !text.contains(placeholder),
                        "{lang:?} {kind}: {} keeps {placeholder}",
                        file.display()
                    );
                }
            }
            let config: toml::Table =
                std::fs::read_to_string(dir.path().join(project.config)).unwrap().parse().unwrap();
            let names_it = toml::to_string(&config).unwrap().contains(&project.component);
            assert!(names_it, "{lang:?} {kind}: the config runs {}", project.component);
            let readme = std::fs::read_to_string(dir.path().join("README.md")).unwrap();
            assert!(readme.contains(project.build) && readme.contains(CONTRACT_VERSION), "{readme}");
        }
    }
}

#[test]
fn a_rust_project_carries_the_sdk_standing_alone() {
    let dir = tempfile::tempdir().unwrap();
    let project = write(&request(PluginKind::Reporter, Lang::Rust, dir.path())).unwrap();
    assert_eq!(project.component, "target/wasm32-wasip2/release/my_plugin.wasm");
    let manifest = |path: &str| -> toml::Table {
        std::fs::read_to_string(dir.path().join(path)).unwrap().parse().unwrap()
    };
    let plugin = manifest("Cargo.toml");
    assert_eq!(plugin["package"]["name"].as_str(), Some("my-plugin"));
    assert!(plugin.contains_key("workspace"), "a workspace of its own");
    for krate in ["benchkit-pdk", "benchkit-schema"] {
        let m = manifest(&format!("sdk/{krate}/Cargo.toml"));
        let text = toml::to_string(&m).unwrap();
        assert!(!text.contains("workspace"), "{krate} inherits nothing: {text}");
        assert_eq!(m["package"]["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
    }
    let pdk = manifest("sdk/benchkit-pdk/Cargo.toml");
    assert_eq!(pdk["dependencies"]["benchkit-schema"]["path"].as_str(), Some("../benchkit-schema"));
    let wit = std::fs::read_to_string(dir.path().join("sdk/benchkit-pdk/wit/benchkit.wit")).unwrap();
    assert!(wit.contains(&format!("package benchkit:plugin@{CONTRACT_VERSION};")));
    assert!(dir.path().join("sdk/benchkit-schema/src/lib.rs").is_file());
}
