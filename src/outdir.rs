//! Output folders that are whole or plainly not: one writer at a time, every file written
//! under a temporary name and renamed into place, a completion marker written last.
//!
//! A folder doorbell writes (`run --out`, `sweep --out`, `merge --out`) goes through four
//! steps:
//! 1. **claim** ([`claim`]): take the folder's lock (`.doorbell.lock`, holding the
//!    writer's process id and host; a lock whose process no longer runs on this host is
//!    stale and taken over), then clear what a previous finished run wrote there (the
//!    files its marker lists). A folder holding doorbell output without a marker (a run
//!    stopped while writing, or an older version's output) is refused unless the user says
//!    `--force`; files doorbell never writes are never touched.
//! 2. **write**: every file goes to `.doorbell-tmp.<name>` and is renamed into place when
//!    whole ([`write_atomic`], [`AtomicFile`]), so a reader never sees a cut file under a
//!    real name.
//! 3. **seal** ([`seal`]): write `complete.json` last, listing every output file (with its
//!    size in bytes for the data files) and the sub-folders that are themselves sealed.
//! 4. **release**: the lock goes when the [`OutDir`] is dropped.
//!
//! Readers ([`check_whole`], used by `plot`) refuse a folder without a marker or whose
//! data files' sizes differ from what the marker says.
//!
//! Left out: `fsync`. A killed process leaves whole files or none (rename is atomic on
//! POSIX file systems); a power cut may still lose the last renames.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The completion marker's file name.
pub const MARKER: &str = "complete.json";
/// The lock file's name.
pub const LOCK: &str = ".doorbell.lock";
/// Prefix of files being written.
const TMP: &str = ".doorbell-tmp.";
/// An unfinished sweep's journal (one header line, then one row per finished run).
pub const JOURNAL: &str = "sweep-progress.jsonl";

/// Files whose size the marker records (they are deterministic and read back by `plot`).
const DATA_FILES: &[&str] = &[
    "summary.json",
    "flows.csv",
    "ports.csv",
    "timeseries.csv",
    "collective.csv",
    "training.csv",
    "compare.csv",
    "compare-stats.csv",
    "window.csv",
    "host.csv",
    "sweep.csv",
    "sweep-stats.csv",
    "sweep.json",
];
/// Output files whose size varies from run to run (wall-clock figures).
const OTHER_FILES: &[&str] = &["perf.json"];
/// The charts `plot` draws (each as `.png` and `.svg`).
pub const PLOT_STEMS: &[&str] = &[
    "sweep-fct-p99",
    "sweep-fct-p999",
    "sweep-slowdown-p99",
    "sweep-busbw",
    "sweep-goodput",
    "busbw",
    "fct-cdf",
    "timeseries-queue",
    "timeseries-rate",
    "window",
];

/// Whether a compare set may not be called `name`: its folder would clash with a file
/// or folder doorbell writes beside it (compared without case, as some file systems do).
pub fn reserved_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    is_output_file(&lower) || lower == "points"
}

/// Whether doorbell writes a file of this name into an output folder.
fn is_output_file(name: &str) -> bool {
    DATA_FILES.contains(&name)
        || OTHER_FILES.contains(&name)
        || name == MARKER
        || name == JOURNAL
        || name.starts_with(TMP)
        || name
            .rsplit_once('.')
            .is_some_and(|(stem, ext)| (ext == "png" || ext == "svg") && PLOT_STEMS.contains(&stem))
}

/// Whether a sub-folder is doorbell output (a compare set, a sweep point, `points/`).
fn is_output_folder(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "points")
        || path.join(MARKER).is_file()
        || path.join("summary.json").is_file()
}

/// `complete.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// What wrote the folder: `run`, `compare`, `sweep`, `merge`, `points`.
    pub kind: String,
    /// Output files and, for data files, their size in bytes.
    pub files: BTreeMap<String, Option<u64>>,
    /// Sub-folders that are sealed output themselves.
    #[serde(default)]
    pub folders: Vec<String>,
}

/// How a claim treats output already in the folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Clear a previous finished run's files; refuse unfinished output.
    Fresh,
    /// Clear any doorbell output, finished or not (`--force`).
    Force,
    /// Keep everything (`sweep --resume`): the caller reads the journal.
    Resume,
}

/// Why a folder cannot be claimed or read.
#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    #[error("{path}: is a file, not a folder: give --out a folder")]
    NotAFolder { path: String },
    #[error(
        "{path}: in use by another doorbell (process {pid} on host {host}); wait for it to end, \
         or delete {path}/{LOCK} if no doorbell is running there"
    )]
    InUse {
        path: String,
        pid: String,
        host: String,
    },
    #[error("{path}: holds output of a run that did not finish (no {MARKER}): {found}; {hint}")]
    Unfinished {
        path: String,
        found: String,
        hint: String,
    },
    #[error("{path}: {what}")]
    NotWhole { path: String, what: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl OutDirError {
    /// 2 for a refusal the user can act on, 1 for a failed read or write.
    pub fn exit_code(&self) -> u8 {
        match self {
            OutDirError::Io { .. } => 1,
            _ => 2,
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutDirError + '_ {
    move |source| OutDirError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A claimed output folder: holds the lock until dropped.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
    lock: PathBuf,
    /// The previous finished output's marker, when claimed for [`Claim::Resume`].
    pub previous: Option<Marker>,
}

impl OutDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.lock);
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Whether the lock's holder is known to have ended: same host, and the host has `/proc`
/// with no entry for the process.
fn stale(pid: &str, host: &str) -> bool {
    host == host_name()
        && Path::new("/proc/self").exists()
        && pid.parse::<u32>().is_ok()
        && !Path::new("/proc").join(pid).exists()
}

fn take_lock(dir: &Path) -> Result<PathBuf, OutDirError> {
    let path = dir.join(LOCK);
    for _ in 0..2 {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                writeln!(f, "{} {}", std::process::id(), host_name()).map_err(io(&path))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let mut words = text.split_whitespace();
                let pid = words.next().unwrap_or("?").to_string();
                let host = words.next().unwrap_or("?").to_string();
                if !stale(&pid, &host) {
                    return Err(OutDirError::InUse {
                        path: dir.display().to_string(),
                        pid,
                        host,
                    });
                }
                std::fs::remove_file(&path).map_err(io(&path))?;
            }
            Err(e) => return Err(io(&path)(e)),
        }
    }
    Err(OutDirError::InUse {
        path: dir.display().to_string(),
        pid: "?".into(),
        host: "?".into(),
    })
}

/// Reads a folder's marker; `None` when it has none or it does not parse.
pub fn read_marker(dir: &Path) -> Option<Marker> {
    let text = std::fs::read_to_string(dir.join(MARKER)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Doorbell output in `dir` (file and folder names, sorted).
fn output_entries(dir: &Path) -> Result<Vec<String>, OutDirError> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        let name = e.file_name().to_string_lossy().to_string();
        let p = e.path();
        if name == LOCK {
            continue;
        }
        if (p.is_file() && is_output_file(&name)) || (p.is_dir() && is_output_folder(&p)) {
            found.push(name);
        }
    }
    found.sort();
    Ok(found)
}

/// Removes doorbell output from `dir`: output files, and output sub-folders after clearing
/// them the same way (a sub-folder is removed only once empty).
fn clear(dir: &Path) -> Result<(), OutDirError> {
    // The marker goes first: a folder half cleared is plainly unfinished.
    let marker = dir.join(MARKER);
    if marker.exists() {
        std::fs::remove_file(&marker).map_err(io(&marker))?;
    }
    for name in output_entries(dir)? {
        let p = dir.join(&name);
        if p.is_dir() {
            clear(&p)?;
            let _ = std::fs::remove_dir(&p);
        } else {
            std::fs::remove_file(&p).map_err(io(&p))?;
        }
    }
    Ok(())
}

/// Claims `dir` for writing (creating it): takes the lock, then clears or keeps what is
/// there as `how` says.
pub fn claim(dir: &Path, how: Claim) -> Result<OutDir, OutDirError> {
    if dir.exists() && !dir.is_dir() {
        return Err(OutDirError::NotAFolder {
            path: dir.display().to_string(),
        });
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let lock = take_lock(dir)?;
    let mut out = OutDir {
        path: dir.to_path_buf(),
        lock,
        previous: None,
    };
    let marker = read_marker(dir);
    match (how, marker) {
        (Claim::Resume, m) => out.previous = m,
        (Claim::Force, _) | (Claim::Fresh, Some(_)) => clear(dir)?,
        (Claim::Fresh, None) => {
            let found = output_entries(dir)?;
            if !found.is_empty() {
                let hint = if found.iter().any(|f| f == JOURNAL) {
                    "it is an unfinished sweep: `sweep --resume` finishes it, `--force` starts over"
                } else {
                    "pass --force to clear them, or choose another --out"
                };
                let shown: Vec<&str> = found.iter().take(6).map(|s| s.as_str()).collect();
                return Err(OutDirError::Unfinished {
                    path: dir.display().to_string(),
                    found: format!(
                        "{}{}",
                        shown.join(", "),
                        if found.len() > 6 { ", ..." } else { "" }
                    ),
                    hint: hint.into(),
                });
            }
        }
    }
    Ok(out)
}

fn tmp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    path.with_file_name(format!("{TMP}{name}"))
}

/// Writes `bytes` to `path` through a temporary file renamed into place.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// A buffered file written under a temporary name; [`AtomicFile::commit`] renames it into
/// place. Dropped without a commit, it removes the temporary file.
pub struct AtomicFile {
    writer: Option<std::io::BufWriter<std::fs::File>>,
    tmp: PathBuf,
    path: PathBuf,
}

impl AtomicFile {
    pub fn create(path: &Path) -> std::io::Result<AtomicFile> {
        let tmp = tmp_path(path);
        Ok(AtomicFile {
            writer: Some(std::io::BufWriter::new(std::fs::File::create(&tmp)?)),
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Flushes and renames the file into place.
    pub fn commit(mut self) -> std::io::Result<()> {
        let w = self.writer.take().expect("committed once");
        w.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&self.tmp, &self.path)
    }
}

impl std::io::Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.as_mut().expect("not committed").write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.as_mut().expect("not committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The path a chart is drawn to before [`publish`] renames it to `path`.
pub fn drawing_path(path: &Path) -> PathBuf {
    tmp_path(path)
}

/// Renames a file drawn at [`drawing_path`] into place.
pub fn publish(path: &Path) -> std::io::Result<()> {
    std::fs::rename(tmp_path(path), path)
}

/// Writes `dir`'s completion marker (last): every output file in it, with sizes for the
/// data files, and its sealed sub-folders.
pub fn seal(dir: &Path, kind: &str) -> std::io::Result<()> {
    let mut m = Marker {
        kind: kind.into(),
        files: BTreeMap::new(),
        folders: Vec::new(),
    };
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().to_string();
        let p = e.path();
        if p.is_dir() {
            if p.join(MARKER).is_file() {
                m.folders.push(name);
            }
        } else if is_output_file(&name)
            && name != MARKER
            && name != JOURNAL
            && !name.starts_with(TMP)
        {
            let size = if DATA_FILES.contains(&name.as_str()) {
                Some(e.metadata()?.len())
            } else {
                None
            };
            m.files.insert(name, size);
        }
    }
    m.folders.sort();
    let mut text = serde_json::to_string_pretty(&m).map_err(std::io::Error::other)?;
    text.push('\n');
    write_atomic(&dir.join(MARKER), text.as_bytes())
}

/// Seals `dir` again after more output was added (`plot`): its sealed sub-folders first,
/// each with the kind its marker had.
pub fn reseal(dir: &Path, m: &Marker) -> std::io::Result<()> {
    for f in &m.folders {
        let sub = dir.join(f);
        if let Some(sm) = read_marker(&sub) {
            reseal(&sub, &sm)?;
        }
    }
    seal(dir, &m.kind)
}

/// Checks that `dir` holds finished output: a marker, every data file it lists at the size
/// it lists, and every listed sub-folder whole too.
pub fn check_whole(dir: &Path) -> Result<Marker, OutDirError> {
    let not_whole = |what: String| OutDirError::NotWhole {
        path: dir.display().to_string(),
        what,
    };
    if !dir.join(MARKER).is_file() {
        return Err(not_whole(format!(
            "not a finished doorbell output folder: no {MARKER} (the run that writes it \
             was stopped, failed or is still running; run it again)"
        )));
    }
    let m = read_marker(dir).ok_or_else(|| {
        not_whole(format!(
            "{MARKER} does not parse: the folder was changed after its run"
        ))
    })?;
    for (name, size) in &m.files {
        let p = dir.join(name);
        let Ok(meta) = std::fs::metadata(&p) else {
            return Err(not_whole(format!(
                "{name} is missing: the folder was changed after its run"
            )));
        };
        if let Some(want) = size {
            if meta.len() != *want {
                return Err(not_whole(format!(
                    "{name} has {} bytes where its run wrote {want}: it was cut or changed after the run",
                    meta.len()
                )));
            }
        }
    }
    for f in &m.folders {
        check_whole(&dir.join(f))?;
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("doorbell-outdir-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_sealed_folder_is_cleared_by_the_next_claim_and_other_files_stay() {
        let d = tmp("clear");
        {
            let o = claim(&d, Claim::Fresh).unwrap();
            write_atomic(&o.path().join("summary.json"), b"{}").unwrap();
            write_atomic(&o.path().join("timeseries.csv"), b"t\n").unwrap();
            std::fs::create_dir_all(d.join("set-a")).unwrap();
            write_atomic(&d.join("set-a/flows.csv"), b"f\n").unwrap();
            seal(&d.join("set-a"), "run").unwrap();
            std::fs::write(d.join("notes.txt"), b"mine").unwrap();
            seal(&d, "compare").unwrap();
            let m = check_whole(&d).unwrap();
            assert_eq!(m.files.get("summary.json"), Some(&Some(2)));
            assert_eq!(m.folders, vec!["set-a".to_string()]);
            assert!(!m.files.contains_key("notes.txt"));
        }
        assert!(!d.join(LOCK).exists(), "the lock goes with the claim");
        let _o = claim(&d, Claim::Fresh).unwrap();
        assert!(!d.join("summary.json").exists());
        assert!(!d.join("timeseries.csv").exists());
        assert!(!d.join("set-a").exists(), "a stale set folder goes");
        assert!(d.join("notes.txt").exists(), "a user's file stays");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn unfinished_output_is_refused_without_force_and_cleared_with_it() {
        let d = tmp("unfinished");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("summary.json"), b"{}").unwrap();
        std::fs::write(d.join(".doorbell-tmp.flows.csv"), b"half").unwrap();
        let e = claim(&d, Claim::Fresh).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(
            msg.contains("did not finish") && msg.contains("--force"),
            "{msg}"
        );
        assert!(!d.join(LOCK).exists(), "a refused claim releases the lock");
        let _o = claim(&d, Claim::Force).unwrap();
        assert!(!d.join("summary.json").exists());
        assert!(!d.join(".doorbell-tmp.flows.csv").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_live_lock_refuses_and_a_dead_one_is_taken_over() {
        let d = tmp("lock");
        let held = claim(&d, Claim::Fresh).unwrap();
        let e = claim(&d, Claim::Fresh).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
        drop(held);
        // A process id no running process has (above Linux's pid_max of 2^22).
        std::fs::write(d.join(LOCK), format!("4294967295 {}\n", host_name())).unwrap();
        if Path::new("/proc/self").exists() {
            claim(&d, Claim::Fresh).unwrap();
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_cut_data_file_is_not_whole() {
        let d = tmp("cut");
        std::fs::create_dir_all(&d).unwrap();
        write_atomic(&d.join("flows.csv"), b"a,b\n1,2\n").unwrap();
        seal(&d, "run").unwrap();
        check_whole(&d).unwrap();
        std::fs::write(d.join("flows.csv"), b"a,b\n").unwrap();
        let e = check_whole(&d).unwrap_err().to_string();
        assert!(
            e.contains("flows.csv has 4 bytes where its run wrote 8"),
            "{e}"
        );
        std::fs::remove_file(d.join(MARKER)).unwrap();
        assert!(check_whole(&d)
            .unwrap_err()
            .to_string()
            .contains("no complete.json"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_uncommitted_file_leaves_nothing_under_its_name() {
        let d = tmp("atomic");
        std::fs::create_dir_all(&d).unwrap();
        {
            let mut f = AtomicFile::create(&d.join("flows.csv")).unwrap();
            f.write_all(b"partial").unwrap();
        }
        assert!(!d.join("flows.csv").exists());
        assert!(!tmp_path(&d.join("flows.csv")).exists());
        let mut f = AtomicFile::create(&d.join("flows.csv")).unwrap();
        f.write_all(b"whole\n").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(d.join("flows.csv")).unwrap(), b"whole\n");
        let _ = std::fs::remove_dir_all(&d);
    }
}
