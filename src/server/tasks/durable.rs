//! Records kept one JSON file each in a directory, replaced atomically
//! (written to a temporary file beside it, fsynced, renamed over). A file
//! that does not parse is set aside (renamed `*.corrupt`) with a log line
//! naming it and why, and the others load.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {source}")]
pub struct StoreError {
    what: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

impl StoreError {
    pub fn io(what: &'static str, path: &Path, source: std::io::Error) -> StoreError {
        StoreError {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

fn err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// One directory of records.
#[derive(Clone, Debug)]
pub struct Dir {
    path: PathBuf,
}

/// Ids are ours (`tsk_…`, `aut_…`, `run_…`); anything else never names a
/// file.
fn safe(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Dir {
    pub fn open(path: PathBuf) -> Result<Dir, StoreError> {
        std::fs::create_dir_all(&path).map_err(err("cannot create", &path))?;
        Ok(Dir { path })
    }

    fn file(&self, id: &str) -> Result<PathBuf, StoreError> {
        if !safe(id) {
            return Err(StoreError {
                what: "not a record id:",
                path: PathBuf::from(id),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        }
        Ok(self.path.join(format!("{id}.json")))
    }

    /// Replace record `id` atomically (write, fsync, rename, fsync the
    /// directory).
    pub fn save<T: Serialize>(&self, id: &str, v: &T) -> Result<(), StoreError> {
        let path = self.file(id)?;
        let json = serde_json::to_vec_pretty(v).map_err(|e| StoreError {
            what: "cannot encode",
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.path)
            .map_err(err("cannot create a temporary file in", &self.path))?;
        tmp.write_all(&json)
            .and_then(|_| tmp.as_file().sync_all())
            .map_err(err("cannot write", &path))?;
        tmp.persist(&path)
            .map_err(|e| err("cannot replace", &path)(e.error))?;
        if let Ok(d) = std::fs::File::open(&self.path) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    pub fn exists(&self, id: &str) -> bool {
        self.file(id).is_ok_and(|p| p.exists())
    }

    pub fn remove(&self, id: &str) -> Result<(), StoreError> {
        let path = self.file(id)?;
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(err("cannot remove", &path)(e))
            }
            _ => Ok(()),
        }
    }

    /// Every record that parses, sorted by file name; each one that does
    /// not is renamed `<name>.corrupt` and reported on stderr (`what`
    /// names the kind of record).
    pub fn load_all<T: DeserializeOwned>(&self, what: &str) -> Vec<T> {
        let Ok(rd) = std::fs::read_dir(&self.path) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut out = Vec::new();
        for p in files {
            let parsed = std::fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<T>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(v) => out.push(v),
                Err(why) => {
                    let mut aside = p.clone().into_os_string();
                    aside.push(".corrupt");
                    let aside = PathBuf::from(aside);
                    let moved = std::fs::rename(&p, &aside);
                    eprintln!(
                        "codewhale: {what} record {} is corrupt ({why}); {}",
                        p.display(),
                        match moved {
                            Ok(()) => format!("set aside as {}", aside.display()),
                            Err(e) => format!("could not set it aside ({e}); skipped"),
                        }
                    );
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct R {
        n: u32,
    }

    #[test]
    fn a_corrupt_record_is_set_aside_and_the_others_load() {
        let d = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path().join("r")).unwrap();
        dir.save("a", &R { n: 1 }).unwrap();
        dir.save("c", &R { n: 3 }).unwrap();
        std::fs::write(d.path().join("r/b.json"), b"{\"n\": ").unwrap();
        let got: Vec<R> = dir.load_all("test");
        assert_eq!(got, vec![R { n: 1 }, R { n: 3 }]);
        assert!(d.path().join("r/b.json.corrupt").exists());
        assert!(!d.path().join("r/b.json").exists());
        // No temporary files are left beside the records.
        let names: Vec<String> = std::fs::read_dir(d.path().join("r"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn ids_never_name_other_files() {
        let d = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path().to_path_buf()).unwrap();
        assert!(dir.save("../x", &R { n: 1 }).is_err());
        assert!(!dir.exists("../x"));
    }
}
