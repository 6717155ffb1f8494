//! Path rules: an exec `cwd` stays inside its sandbox, an active workspace inside the
//! workspace root. Both are checked lexically first, then after resolving symlinks.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("`{0}` must not contain `..`")]
    ParentComponent(String),
    #[error("`{0}` must be relative to the sandbox root")]
    Absolute(String),
    #[error("`{0}` resolves outside its root")]
    Escapes(String),
    #[error("`{0}` does not exist or is not a directory")]
    Missing(String),
    #[error("`{0}` is not a usable path")]
    Invalid(String),
}

fn shown(p: &str) -> String {
    p.chars().take(200).collect()
}

fn lexically_safe(p: &str) -> Result<&Path, PathError> {
    if p.is_empty() || p.contains('\0') {
        return Err(PathError::Invalid(shown(p)));
    }
    let path = Path::new(p);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(PathError::ParentComponent(shown(p)));
    }
    Ok(path)
}

/// Resolves an exec `cwd` (relative, no `..`, no symlink leading out) under `root`.
pub fn resolve_cwd(root: &Path, cwd: Option<&str>) -> Result<PathBuf, PathError> {
    let root = root
        .canonicalize()
        .map_err(|_| PathError::Missing(root.display().to_string()))?;
    let Some(cwd) = cwd else { return Ok(root) };
    let rel = lexically_safe(cwd)?;
    if rel.is_absolute() {
        return Err(PathError::Absolute(shown(cwd)));
    }
    let resolved = root
        .join(rel)
        .canonicalize()
        .map_err(|_| PathError::Missing(shown(cwd)))?;
    if !resolved.starts_with(&root) {
        return Err(PathError::Escapes(shown(cwd)));
    }
    if !resolved.is_dir() {
        return Err(PathError::Missing(shown(cwd)));
    }
    Ok(resolved)
}

/// Resolves an active workspace's `host_workspace` (relative to `workspace_root`, or an
/// absolute path inside it), creating the folder if needed. The root itself is refused.
pub fn resolve_workspace(workspace_root: &Path, host: &str) -> Result<PathBuf, PathError> {
    let root = workspace_root
        .canonicalize()
        .map_err(|_| PathError::Missing(workspace_root.display().to_string()))?;
    let p = lexically_safe(host)?;
    let candidate = if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    };
    if !candidate.exists() {
        // Refuse before creating anything: the deepest existing ancestor must be inside.
        let existing = candidate
            .ancestors()
            .find(|a| a.exists())
            .and_then(|a| a.canonicalize().ok())
            .ok_or_else(|| PathError::Invalid(shown(host)))?;
        if !existing.starts_with(&root) {
            return Err(PathError::Escapes(shown(host)));
        }
        std::fs::create_dir_all(&candidate).map_err(|_| PathError::Invalid(shown(host)))?;
    }
    let resolved = candidate
        .canonicalize()
        .map_err(|_| PathError::Missing(shown(host)))?;
    if !resolved.starts_with(&root) || resolved == root {
        return Err(PathError::Escapes(shown(host)));
    }
    if !resolved.is_dir() {
        return Err(PathError::Missing(shown(host)));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_must_stay_inside() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.path().join("out")).unwrap();
        std::os::unix::fs::symlink("sub", root.path().join("in")).unwrap();
        let canon = root.path().canonicalize().unwrap();
        assert_eq!(resolve_cwd(root.path(), None).unwrap(), canon);
        assert_eq!(
            resolve_cwd(root.path(), Some("sub")).unwrap(),
            canon.join("sub")
        );
        assert_eq!(
            resolve_cwd(root.path(), Some("in")).unwrap(),
            canon.join("sub")
        );
        assert!(matches!(
            resolve_cwd(root.path(), Some("../")),
            Err(PathError::ParentComponent(_))
        ));
        assert!(matches!(
            resolve_cwd(root.path(), Some("sub/../..")),
            Err(PathError::ParentComponent(_))
        ));
        assert!(matches!(
            resolve_cwd(root.path(), Some("/etc")),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(
            resolve_cwd(root.path(), Some("out")),
            Err(PathError::Escapes(_))
        ));
        assert!(matches!(
            resolve_cwd(root.path(), Some("nope")),
            Err(PathError::Missing(_))
        ));
    }

    #[test]
    fn workspaces_must_lie_inside_the_workspace_root() {
        let ws = tempfile::tempdir().unwrap();
        let canon = ws.path().canonicalize().unwrap();
        assert_eq!(
            resolve_workspace(ws.path(), "proj").unwrap(),
            canon.join("proj")
        );
        let abs = canon.join("other");
        assert_eq!(
            resolve_workspace(ws.path(), abs.to_str().unwrap()).unwrap(),
            abs
        );
        assert!(resolve_workspace(ws.path(), "/etc").is_err());
        assert!(resolve_workspace(ws.path(), "/tmp/elsewhere-sagents").is_err());
        assert!(!Path::new("/tmp/elsewhere-sagents").exists());
        assert!(resolve_workspace(ws.path(), "../x").is_err());
        std::os::unix::fs::symlink("/etc", ws.path().join("sneaky")).unwrap();
        assert!(matches!(
            resolve_workspace(ws.path(), "sneaky"),
            Err(PathError::Escapes(_))
        ));
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("hop")).unwrap();
        assert!(resolve_workspace(ws.path(), "hop/new").is_err());
        assert!(!outside.path().join("new").exists());
        assert!(resolve_workspace(ws.path(), canon.to_str().unwrap()).is_err());
    }
}
