//! A study config's sample data, made where the config reads it when it is
//! missing, before the config is checked: `benchkit run` of a study is one
//! command on a fresh checkout.

use super::Make;
use crate::data::commands::folder_writer::ImageFormat;
use crate::data::commands::{self, FolderSpec, PackFormat, PackSpec};
use crate::data::{formats::voc, DataError};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Only what `[study] prepare` says; the rest of the config is read (and
/// any error in it reported) when the config is loaded.
#[derive(Deserialize)]
struct Config {
    study: Option<StudyTable>,
}

#[derive(Deserialize)]
struct StudyTable {
    #[serde(default)]
    prepare: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    make: Make,
    from: PathBuf,
    to: PathBuf,
}

/// Make each missing folder `[study] prepare` of config `config` lists, in
/// order, each written beside its place and moved there once whole.
pub fn prepare_study_data(config: &Path) -> Result<(), DataError> {
    let Ok(text) = crate::bounds::read_text(config, "a config", crate::bounds::CONFIG_BYTES) else {
        return Ok(());
    };
    let Ok(Config { study: Some(study) }) = toml::from_str::<Config>(&text) else { return Ok(()) };
    let base = config.parent().unwrap_or(Path::new("."));
    for step in study.prepare {
        let (from, to) = (base.join(&step.from), base.join(&step.to));
        if to.exists() {
            continue;
        }
        let mut partial = to.clone().into_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DataError::Io { path, source }
        };
        if partial.exists() {
            std::fs::remove_dir_all(&partial).map_err(io(&partial))?;
        }
        if let Some(parent) = partial.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        eprintln!("study data: making {} from {}", to.display(), from.display());
        match step.make {
            Make::ImageFolder => {
                commands::export_folder(&FolderSpec {
                    source: from,
                    source_format: None,
                    num_classes: None,
                    dir: partial.clone(),
                    image_format: ImageFormat::Png,
                    limit: None,
                })?;
            }
            Make::Shards | Make::Tfrecord | Make::Webdataset => {
                commands::pack(&PackSpec {
                    source: from,
                    source_format: None,
                    num_classes: None,
                    dir: partial.clone(),
                    format: match step.make {
                        Make::Tfrecord => PackFormat::Tfrecord,
                        Make::Webdataset => PackFormat::Webdataset,
                        _ => PackFormat::Bkshard,
                    },
                    gzip: false,
                    shard_size: 64 << 20,
                    seed: 0,
                })?;
            }
            Make::DetectionSample => {
                let spec =
                    voc::sample::SampleSpec { train: 400, test: 100, size: 300, max_objects: 4, seed: 0 };
                commands::detection_sample(&from, &partial, spec)?;
            }
        }
        std::fs::rename(&partial, &to).map_err(io(&to))?;
    }
    Ok(())
}
