//! Output directories, and the one place strata deletes anything.
//!
//! A compiler must never delete a file it did not create. The rules:
//!
//! 1. **Refused outright**, by a pure check on the path before any
//!    filesystem call ([`refuse`]): the root of the filesystem (the root
//!    component of any path: `/`, `C:\`), the current directory and its
//!    ancestors, and the user's home directory and its ancestors. Paths are
//!    made absolute and normalised lexically first (`.`, `..`), and the check
//!    is repeated on the real path (symbolic links in the parent resolved)
//!    once the parent is known to exist. A directory that is a mount point
//!    (the root of a mounted filesystem) is refused too.
//! 2. **Work happens beside the target**: [`produce`] creates a fresh,
//!    uniquely named directory next to the target (`tempfile`), lets the
//!    caller write everything into it, writes the manifest [`MARKER`] (every
//!    file strata wrote, with its size and content hash), and only then moves
//!    it into place with a rename. On failure the fresh directory is removed
//!    and the target is untouched.
//! 3. **An existing target is replaced only when it is provably a previous
//!    strata output**: it holds a [`MARKER`] manifest, and every entry in it
//!    is listed there, of the same kind, with the same size and hash (so a
//!    file the user added or edited keeps the directory). An empty directory
//!    may be replaced too. Anything else (a file, a symbolic link, a
//!    directory with anything strata did not write) is an error that says so
//!    and touches nothing. The old output is first renamed aside, the new one
//!    renamed into place, and then the old one removed.
//! 4. **Every deletion goes through [`remove_owned`]**: it removes only the
//!    files and directories it is given (a manifest or a walk of a directory
//!    strata created itself), with `remove_file` and `remove_dir` (never a
//!    recursive removal: a directory that still holds anything unlisted stays),
//!    after the same path check as rule 1. Each failure is an error naming the
//!    path; none is ignored.
//!
//! [`Scratch`] is a directory strata creates for its own use (a `check`
//! without `--workdir`, tests): it is removed through [`remove_owned`] too.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The manifest strata writes into every output directory it moves into place.
pub const MARKER: &str = ".strata-output";
const MAGIC: &str = "strata output v1";

/// Where the process stands: the directories a target may never be.
#[derive(Clone, Debug)]
pub struct Env {
    /// The current directory (absolute).
    pub cwd: PathBuf,
    /// The user's home directory, when known.
    pub home: Option<PathBuf>,
}

impl Env {
    /// The process's current directory and `HOME` (`USERPROFILE` on Windows).
    pub fn current() -> Result<Env> {
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        let home = ["HOME", "USERPROFILE"]
            .iter()
            .filter_map(std::env::var_os)
            .find(|h| !h.is_empty())
            .map(|h| normalize(Path::new(&h), &cwd));
        Ok(Env { cwd, home })
    }

    /// The same directories with symbolic links resolved, where they exist.
    fn real(&self) -> Env {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        Env {
            cwd: real(&self.cwd),
            home: self.home.as_deref().map(real),
        }
    }
}

fn out_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

/// `path` made absolute against `cwd` and normalised lexically: `.` dropped,
/// `..` taking away the component before it (never above the root).
/// No filesystem access.
pub fn normalize(path: &Path, cwd: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(c),
            Component::CurDir => {}
            Component::ParentDir => {
                // Never pops the root: `/..` is `/`.
                if out.file_name().is_some() {
                    out.pop();
                }
            }
        }
    }
    out
}

/// The pure check of rule 1: `target` (made absolute against `env.cwd` and
/// normalised) if strata may write it, else the refusal. Touches no file, so
/// it runs before anything else does.
pub fn refuse(target: &Path, env: &Env) -> Result<PathBuf> {
    let cwd = normalize(&env.cwd, Path::new("/"));
    let abs = normalize(target, &cwd);
    if abs.file_name().is_none() {
        return Err(out_err(
            target,
            format!(
                "refusing to write here: {} is the root of the filesystem",
                abs.display()
            ),
        ));
    }
    if cwd == abs {
        return Err(out_err(
            target,
            "refusing to write here: it is the current directory",
        ));
    }
    if cwd.starts_with(&abs) {
        return Err(out_err(
            target,
            format!(
                "refusing to write here: {} is an ancestor of the current directory {}",
                abs.display(),
                cwd.display()
            ),
        ));
    }
    if let Some(home) = &env.home {
        let home = normalize(home, &cwd);
        if home == abs {
            return Err(out_err(
                target,
                "refusing to write here: it is your home directory",
            ));
        }
        if home.starts_with(&abs) {
            return Err(out_err(
                target,
                format!(
                    "refusing to write here: {} is an ancestor of your home directory {}",
                    abs.display(),
                    home.display()
                ),
            ));
        }
    }
    Ok(abs)
}

/// One entry of a directory strata wrote, relative to that directory, with
/// `/` between components.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub rel: String,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// A regular file: its size and FNV-1a 64 content hash.
    File {
        size: u64,
        hash: u64,
    },
    /// A symbolic link or anything else strata never writes.
    Other,
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Every entry under `dir` (not following symbolic links), sorted by path;
/// files hashed when `hash` is set. A name that is not UTF-8 is reported as
/// such (strata writes only UTF-8 names).
fn walk(dir: &Path, hash: bool) -> Result<Vec<Entry>> {
    fn go(root: &Path, rel: &str, hash: bool, out: &mut Vec<Entry>) -> Result<()> {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let rd = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        for e in rd {
            let e = e.map_err(|e| Error::io(&dir, e))?;
            let name = e.file_name();
            let name = name.to_str().ok_or_else(|| {
                out_err(
                    &e.path(),
                    "a name that is not UTF-8 (strata never writes one)",
                )
            })?;
            let r = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let path = e.path();
            let md = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
            let kind = if md.is_dir() {
                Kind::Dir
            } else if md.is_file() {
                let h = if hash {
                    fnv1a(&std::fs::read(&path).map_err(|e| Error::io(&path, e))?)
                } else {
                    0
                };
                Kind::File {
                    size: md.len(),
                    hash: h,
                }
            } else {
                Kind::Other
            };
            let is_dir = kind == Kind::Dir;
            out.push(Entry {
                rel: r.clone(),
                kind,
            });
            if is_dir {
                go(root, &r, hash, out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    go(dir, "", hash, &mut out)?;
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// The manifest text of `entries` (deterministic: sorted, no times, no
/// absolute paths).
fn manifest_text(entries: &[Entry]) -> String {
    let mut s = format!("{MAGIC}\n");
    for e in entries {
        match &e.kind {
            Kind::Dir => s.push_str(&format!("d {}\n", e.rel)),
            Kind::File { size, hash } => s.push_str(&format!("f {size} {hash:016x} {}\n", e.rel)),
            Kind::Other => unreachable!("strata writes only files and directories"),
        }
    }
    s
}

/// A relative path as strata writes one: components that are plain names.
fn plain_rel(rel: &str) -> bool {
    !rel.is_empty()
        && rel
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'))
}

fn parse_manifest(text: &str) -> Option<Vec<Entry>> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let mut out = Vec::new();
    for l in lines {
        let e = if let Some(rel) = l.strip_prefix("d ") {
            Entry {
                rel: rel.to_string(),
                kind: Kind::Dir,
            }
        } else {
            let rest = l.strip_prefix("f ")?;
            let mut it = rest.splitn(3, ' ');
            let size = it.next()?.parse().ok()?;
            let hash = u64::from_str_radix(it.next()?, 16).ok()?;
            Entry {
                rel: it.next()?.to_string(),
                kind: Kind::File { size, hash },
            }
        };
        if !plain_rel(&e.rel) || e.rel == MARKER {
            return None;
        }
        out.push(e);
    }
    Some(out)
}

/// What stands at a target before strata writes it.
#[derive(Debug)]
enum Existing {
    Nothing,
    /// An empty directory, or a previous strata output: the entries to
    /// remove once it has been renamed aside (the manifest included).
    Replaceable(Vec<Entry>),
}

/// At most three names from a list, for an error message.
fn some_names(names: &[String]) -> String {
    let shown: Vec<String> = names.iter().take(3).map(|n| format!("`{n}`")).collect();
    let more = names.len().saturating_sub(3);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Inspect the (real, absolute) target: nothing there, or something strata
/// may replace; anything else is an error that touches nothing.
fn inspect(target: &Path, shown: &Path) -> Result<Existing> {
    let md = match std::fs::symlink_metadata(target) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::Nothing),
        Err(e) => return Err(Error::io(shown, e)),
    };
    if md.file_type().is_symlink() {
        return Err(out_err(
            shown,
            "exists and is a symbolic link; strata writes its output only to a directory of its own",
        ));
    }
    if !md.is_dir() {
        return Err(out_err(
            shown,
            "exists and is not a directory; strata will not replace it (choose another output directory)",
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Some(parent) = target.parent() {
            let pmd = std::fs::metadata(parent).map_err(|e| Error::io(parent, e))?;
            if pmd.dev() != md.dev() {
                return Err(out_err(
                    shown,
                    "refusing to write here: it is the root of a mounted filesystem",
                ));
            }
        }
    }
    // Only the top level until a manifest is found: a foreign directory
    // (say /usr) is never walked.
    let mut top = Vec::new();
    for e in std::fs::read_dir(target).map_err(|e| Error::io(shown, e))? {
        let e = e.map_err(|e| Error::io(shown, e))?;
        top.push(e.file_name().to_string_lossy().into_owned());
    }
    if top.is_empty() {
        return Ok(Existing::Replaceable(Vec::new()));
    }
    top.sort();
    let marker = target.join(MARKER);
    let manifest = match std::fs::symlink_metadata(&marker) {
        Ok(m) if m.is_file() => {
            let text = std::fs::read_to_string(&marker).map_err(|e| Error::io(&marker, e))?;
            parse_manifest(&text).ok_or_else(|| {
                out_err(
                    shown,
                    format!("exists, and its `{MARKER}` is not a manifest strata wrote; strata will not replace it"),
                )
            })?
        }
        _ => {
            return Err(out_err(
                shown,
                format!(
                    "exists and is not a previous strata output (no `{MARKER}`; it holds {}); strata replaces only a directory it wrote itself: choose another output directory or move those files away",
                    some_names(&top)
                ),
            ));
        }
    };
    // Hash now: every entry must be listed, of the same kind and content.
    let entries = walk(target, true)?;
    let mut foreign = Vec::new();
    let mut changed = Vec::new();
    for e in &entries {
        if e.rel == MARKER {
            continue;
        }
        match manifest.iter().find(|m| m.rel == e.rel) {
            None => foreign.push(e.rel.clone()),
            Some(m) if m.kind != e.kind => changed.push(e.rel.clone()),
            Some(_) => {}
        }
    }
    if !foreign.is_empty() {
        return Err(out_err(
            shown,
            format!(
                "is a previous strata output, but it also holds {} that strata did not write; strata will not replace it: move those files away or choose another output directory",
                some_names(&foreign)
            ),
        ));
    }
    if !changed.is_empty() {
        return Err(out_err(
            shown,
            format!(
                "is a previous strata output, but {} changed since strata wrote it; strata will not replace it: move it away or choose another output directory",
                some_names(&changed)
            ),
        ));
    }
    Ok(Existing::Replaceable(entries))
}

/// Check a target for writing (rule 1 on the path, then on the real path;
/// the parent must exist) and inspect what is there. Returns the real target.
fn prepare(target: &Path) -> Result<(PathBuf, Existing)> {
    let env = Env::current()?;
    // Pure first: nothing below runs for a refused path.
    let abs = refuse(target, &env)?;
    let parent = abs.parent().expect("refuse rejects the root");
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(out_err(
                target,
                format!("its parent {} is not a directory", parent.display()),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(out_err(
                target,
                format!(
                    "its parent directory {} does not exist (strata creates only the output directory itself)",
                    parent.display()
                ),
            ))
        }
        Err(e) => return Err(Error::io(parent, e)),
    }
    let real_parent = std::fs::canonicalize(parent).map_err(|e| Error::io(parent, e))?;
    let real = real_parent.join(abs.file_name().expect("refuse rejects the root"));
    refuse(&real, &env.real())?;
    let existing = inspect(&real, target)?;
    Ok((real, existing))
}

/// Write an output directory by rule 2 and 3: `write` fills a fresh
/// directory beside `target`, which then replaces `target` (when nothing is
/// there, or an empty directory, or a previous strata output). When `write`
/// fails, or `target` may not be written, `target` is untouched and no
/// temporary directory remains.
pub fn produce<T>(target: &Path, write: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let (real, _) = prepare(target)?;
    let parent = real.parent().expect("prepare returns a path with a parent");
    let name = real
        .file_name()
        .expect("prepare returns a named path")
        .to_string_lossy()
        .into_owned();
    let staging = Scratch::create_in(parent, &format!(".{name}.strata-"))?;
    let value = match write(staging.path()) {
        Ok(v) => v,
        Err(e) => return Err(staging.close_after(e)),
    };
    commit(staging, &real, target)?;
    Ok(value)
}

/// Move the finished staging directory into place, then remove the
/// previous output it replaced (if any).
fn commit(staging: Scratch, real: &Path, shown: &Path) -> Result<()> {
    let replaced = match move_into_place(&staging, real, shown) {
        Ok(r) => r,
        Err(e) => return Err(staging.close_after(e)),
    };
    // The staging directory is the output now: nothing of it to remove.
    staging.disarm();
    match replaced {
        None => Ok(()),
        Some((aside, old)) => remove_owned(&aside, &old).map_err(|e| {
            out_err(
                shown,
                format!(
                    "the new output is in place, but the previous one, moved aside to {}, could not be removed: {e}",
                    aside.display()
                ),
            )
        }),
    }
}

/// Write the manifest into the staging directory and rename it to `real`;
/// a previous output there is renamed aside first and returned with its
/// entries. On an error the staging directory is still the caller's.
fn move_into_place(
    staging: &Scratch,
    real: &Path,
    shown: &Path,
) -> Result<Option<(PathBuf, Vec<Entry>)>> {
    let dir = staging.path();
    let entries = walk(dir, true)?;
    if let Some(e) = entries.iter().find(|e| e.kind == Kind::Other) {
        return Err(out_err(
            shown,
            format!("`{}` is neither a file nor a directory", e.rel),
        ));
    }
    let marker = dir.join(MARKER);
    std::fs::write(&marker, manifest_text(&entries)).map_err(|e| Error::io(&marker, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::io(dir, e))?;
    }
    // Look again: the target may have changed while the output was written.
    match inspect(real, shown)? {
        Existing::Nothing => {
            std::fs::rename(dir, real).map_err(|e| Error::io(shown, e))?;
            Ok(None)
        }
        Existing::Replaceable(old) => {
            let mut aside = dir.as_os_str().to_owned();
            aside.push(".old");
            let aside = PathBuf::from(aside);
            if std::fs::symlink_metadata(&aside).is_ok() {
                return Err(out_err(shown, format!("{} is in the way", aside.display())));
            }
            std::fs::rename(real, &aside).map_err(|e| Error::io(shown, e))?;
            if let Err(e) = std::fs::rename(dir, real) {
                return Err(match std::fs::rename(&aside, real) {
                    Ok(()) => Error::io(shown, e),
                    Err(back) => out_err(
                        shown,
                        format!(
                            "could not move the new output into place ({e}), nor the previous one back from {} ({back})",
                            aside.display()
                        ),
                    ),
                });
            }
            Ok(Some((aside, old)))
        }
    }
}

/// THE deletion function (rule 4). Removes the files and directories
/// `entries` lists under `root` (paths relative to it), deepest first, and
/// then `root` itself, with `remove_file` and `remove_dir` only: anything
/// unlisted keeps its directory, and the removal fails there. `root` passes
/// the path check of rule 1 first, so neither the root of the filesystem
/// nor the current or home directory (or an ancestor) can be removed.
pub fn remove_owned(root: &Path, entries: &[Entry]) -> Result<()> {
    let env = Env::current()?;
    refuse(root, &env)?;
    refuse(root, &env.real())?;
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    // Deepest first: children before their directory.
    sorted.sort_by(|a, b| b.rel.cmp(&a.rel));
    for e in &sorted {
        if !plain_rel(&e.rel) {
            return Err(out_err(
                root,
                format!("refusing to remove `{}`: not a plain relative path", e.rel),
            ));
        }
    }
    for e in sorted.iter().filter(|e| e.kind != Kind::Dir) {
        let p = root.join(&e.rel);
        std::fs::remove_file(&p).map_err(|err| Error::io(&p, err))?;
    }
    for e in sorted.iter().filter(|e| e.kind == Kind::Dir) {
        let p = root.join(&e.rel);
        std::fs::remove_dir(&p).map_err(|err| Error::io(&p, err))?;
    }
    std::fs::remove_dir(root).map_err(|err| Error::io(root, err))
}

/// A directory strata created for itself (uniquely named by `tempfile`),
/// removed through [`remove_owned`] by [`Scratch::close`], or when dropped
/// (a failure to remove it is then printed, not ignored).
#[derive(Debug)]
pub struct Scratch {
    path: Option<PathBuf>,
}

impl Scratch {
    /// A fresh directory under the system's temporary directory.
    pub fn new(prefix: &str) -> Result<Scratch> {
        Scratch::create_in(&std::env::temp_dir(), prefix)
    }

    fn create_in(parent: &Path, prefix: &str) -> Result<Scratch> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(parent)
            .map_err(|e| Error::io(parent, e))?;
        Ok(Scratch {
            path: Some(dir.keep()),
        })
    }

    pub fn path(&self) -> &Path {
        self.path.as_deref().expect("a scratch directory is open")
    }

    /// Remove the directory and everything in it (all of it strata's: the
    /// directory was created fresh with a unique name).
    pub fn close(mut self) -> Result<()> {
        match self.path.take() {
            Some(p) => remove_owned(&p, &walk(&p, false)?),
            None => Ok(()),
        }
    }

    /// Remove the directory after `e`; an error removing it is added to `e`.
    fn close_after(self, e: Error) -> Error {
        let shown = self.path().to_path_buf();
        match self.close() {
            Ok(()) => e,
            Err(c) => Error::Usage(format!(
                "{e}\n(and the temporary directory {} could not be removed: {c})",
                shown.display()
            )),
        }
    }

    /// The directory was moved into place: nothing left to remove.
    fn disarm(mut self) {
        self.path = None;
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let r = walk(&p, false).and_then(|entries| remove_owned(&p, &entries));
            if let Err(e) = r {
                eprintln!(
                    "warning: could not remove the temporary directory {}: {e}",
                    p.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(cwd: &str, home: Option<&str>) -> Env {
        Env {
            cwd: cwd.into(),
            home: home.map(PathBuf::from),
        }
    }

    fn refused(target: &str, e: &Env, needle: &str) {
        match refuse(Path::new(target), e) {
            Ok(p) => panic!("{target} was allowed as {}", p.display()),
            Err(err) => assert!(
                err.to_string().contains(needle),
                "{target}: {err} does not say {needle:?}"
            ),
        }
    }

    /// The root, the current directory and its ancestors, and home and its
    /// ancestors are refused by the pure check, which touches no file: the
    /// paths here need not exist, and nothing is created or removed.
    #[test]
    fn refusals_are_decided_on_the_path_alone() {
        let e = env(
            "/nonexistent-strata/work/proj",
            Some("/nonexistent-strata/home/u"),
        );
        refused("/", &e, "root of the filesystem");
        refused("//", &e, "root of the filesystem");
        refused("/..", &e, "root of the filesystem");
        refused("../../../..", &e, "root of the filesystem");
        refused(
            "/nonexistent-strata/work/proj/../../..",
            &e,
            "root of the filesystem",
        );
        refused(".", &e, "current directory");
        refused("./", &e, "current directory");
        refused("sub/..", &e, "current directory");
        refused("/nonexistent-strata/work/proj", &e, "current directory");
        refused("..", &e, "ancestor of the current directory");
        refused("../..", &e, "ancestor of the current directory");
        refused(
            "/nonexistent-strata",
            &e,
            "ancestor of the current directory",
        );
        refused("/nonexistent-strata/home/u", &e, "home directory");
        refused("/nonexistent-strata/home/u/.", &e, "home directory");
        refused(
            "/nonexistent-strata/home",
            &e,
            "ancestor of your home directory",
        );
        // Siblings and children are fine, and come back absolute.
        let ok = |t: &str, want: &str| {
            assert_eq!(
                refuse(Path::new(t), &e).unwrap(),
                PathBuf::from(want),
                "{t}"
            );
        };
        ok("out", "/nonexistent-strata/work/proj/out");
        ok("./out/../out2", "/nonexistent-strata/work/proj/out2");
        ok("../sibling", "/nonexistent-strata/work/sibling");
        ok(
            "/nonexistent-strata/home/u/out",
            "/nonexistent-strata/home/u/out",
        );
        ok("/nonexistent-strata/homely", "/nonexistent-strata/homely");
        // Without a home, only the other rules apply.
        let e = env("/a/b", None);
        refused("/", &e, "root");
        ok_without_home(&e);
    }

    fn ok_without_home(e: &Env) {
        assert!(refuse(Path::new("/a/c"), e).is_ok());
    }

    /// `remove_owned` refuses `/` (and the current directory) before it
    /// touches anything: the entries it would remove do not exist, so a call
    /// that got past the check would fail with "not found" instead.
    #[test]
    fn remove_owned_refuses_before_any_removal() {
        let ghost = vec![Entry {
            rel: "nonexistent-strata-entry".into(),
            kind: Kind::File { size: 0, hash: 0 },
        }];
        let err = remove_owned(Path::new("/"), &ghost)
            .unwrap_err()
            .to_string();
        assert!(err.contains("root of the filesystem"), "{err}");
        let err = remove_owned(Path::new("."), &ghost)
            .unwrap_err()
            .to_string();
        assert!(err.contains("current directory"), "{err}");
        let cwd = std::env::current_dir().unwrap();
        let err = remove_owned(cwd.parent().unwrap(), &ghost)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ancestor of the current directory"), "{err}");
    }

    #[test]
    fn manifests_round_trip_and_reject_escapes() {
        let entries = vec![
            Entry {
                rel: "a".into(),
                kind: Kind::Dir,
            },
            Entry {
                rel: "a/b c.txt".into(),
                kind: Kind::File {
                    size: 3,
                    hash: fnv1a(b"abc"),
                },
            },
        ];
        let text = manifest_text(&entries);
        assert_eq!(parse_manifest(&text).unwrap(), entries);
        for bad in ["../x", "/etc/passwd", "a/../../x", "a//b", ".", ""] {
            let t = format!("{MAGIC}\nf 1 00 {bad}\n");
            assert!(parse_manifest(&t).is_none(), "{bad:?} accepted");
        }
        assert!(parse_manifest("not a manifest\n").is_none());
        let t = format!("{MAGIC}\nd {MARKER}\n");
        assert!(parse_manifest(&t).is_none());
    }
}
