//! Mirror tests on throwaway repositories built with git2.

use super::*;
use git2::{Signature, Time};
use tempfile::TempDir;

/// A throwaway source repository whose commits are built directly from file lists.
struct Source {
    dir: TempDir,
    repo: Repository,
    clock: i64,
}

impl Source {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        Source {
            dir,
            repo,
            clock: 1_700_000_000,
        }
    }

    fn url(&self) -> String {
        self.dir.path().to_str().unwrap().to_owned()
    }

    /// Commits a tree holding exactly `files` onto `branch`, with the given parents.
    fn commit(
        &mut self,
        branch: &str,
        files: &[(&str, &str)],
        message: &str,
        parents: &[Oid],
    ) -> Oid {
        let empty = self.repo.treebuilder(None).unwrap().write().unwrap();
        let empty = self.repo.find_tree(empty).unwrap();
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, content) in files {
            let blob = self.repo.blob(content.as_bytes()).unwrap();
            update.upsert(*path, blob, git2::FileMode::Blob);
        }
        let tree = update.create_updated(&self.repo, &empty).unwrap();
        let tree = self.repo.find_tree(tree).unwrap();
        self.clock += 60;
        let who =
            Signature::new("Ada Lovelace", "ada@example.com", &Time::new(self.clock, 0)).unwrap();
        let parents: Vec<_> = parents
            .iter()
            .map(|p| self.repo.find_commit(*p).unwrap())
            .collect();
        let parents: Vec<_> = parents.iter().collect();
        let oid = self
            .repo
            .commit(None, &who, &who, message, &tree, &parents)
            .unwrap();
        self.repo
            .reference(&format!("refs/heads/{branch}"), oid, true, "test")
            .unwrap();
        oid
    }
}

fn read(dir: &Path, path: &str) -> Option<String> {
    fs::read_to_string(dir.join(path)).ok()
}

#[test]
fn clone_resolves_branches_and_records_commit_facts() {
    let mut source = Source::new();
    let first = source.commit("main", &[("a.txt", "1")], "first", &[]);
    let second = source.commit("main", &[("a.txt", "2")], "second\n\nbody\n", &[first]);
    let cache = tempfile::tempdir().unwrap();
    let mirror = Mirror::open_or_clone(cache.path(), "demo", &source.url()).unwrap();
    assert!(mirror.path().starts_with(cache.path().join("mirrors")));
    assert_eq!(mirror.resolve("main").unwrap(), second.to_string());
    assert_eq!(mirror.resolve("main~1").unwrap(), first.to_string());
    assert_eq!(
        mirror.resolve(&second.to_string()[..12]).unwrap(),
        second.to_string()
    );
    assert!(matches!(
        mirror.resolve("nope"),
        Err(MirrorError::UnknownRevision { .. })
    ));
    assert!(matches!(
        mirror.resolve("--all"),
        Err(MirrorError::UnknownRevision { .. })
    ));
    assert!(mirror.has_commit(&first.to_string()));
    assert!(!mirror.has_commit(&"0".repeat(40)));
    assert!(!mirror.has_commit(&first.to_string()[..10]));
    let info = mirror.commit_info(&second.to_string()).unwrap();
    assert_eq!(info.sha, second.to_string());
    assert_eq!(info.parents, vec![first.to_string()]);
    assert_eq!(info.author, "Ada Lovelace <ada@example.com>");
    assert_eq!(info.time, 1_700_000_120);
    assert_eq!(info.message, "second\n\nbody\n");
}

#[test]
fn fetch_follows_new_commits_tags_force_pushes_and_deleted_branches() {
    let mut source = Source::new();
    let first = source.commit("main", &[("a", "1")], "first", &[]);
    source.commit("topic", &[("t", "1")], "topic", &[first]);
    let cache = tempfile::tempdir().unwrap();
    let url = format!("file://{}", source.url());
    let mirror = Mirror::open_or_clone(cache.path(), "demo", &url).unwrap();
    assert!(mirror.resolve("topic").is_ok());

    let second = source.commit("main", &[("a", "2")], "second", &[first]);
    let tagged = source.repo.find_object(second, None).unwrap();
    let who = Signature::now("T", "t@example.com").unwrap();
    source
        .repo
        .tag("v1", &tagged, &who, "release", false)
        .unwrap();
    source
        .repo
        .find_reference("refs/heads/topic")
        .unwrap()
        .delete()
        .unwrap();
    assert_eq!(mirror.resolve("main").unwrap(), first.to_string());
    mirror.fetch().unwrap();
    assert_eq!(mirror.resolve("main").unwrap(), second.to_string());
    assert_eq!(mirror.resolve("v1").unwrap(), second.to_string());
    assert!(
        mirror.resolve("topic").is_err(),
        "deleted branches are pruned"
    );

    source
        .repo
        .reference("refs/heads/main", first, true, "force-push")
        .unwrap();
    mirror.fetch().unwrap();
    assert_eq!(mirror.resolve("main").unwrap(), first.to_string());
}

#[test]
fn first_parent_history_skips_merged_branches_newest_first() {
    let mut source = Source::new();
    let root = source.commit("main", &[("f", "0")], "root", &[]);
    let side = source.commit("feature", &[("f", "side")], "side", &[root]);
    let main = source.commit("main", &[("f", "main")], "main", &[root]);
    let merge = source.commit("main", &[("f", "merged")], "merge", &[main, side]);
    let cache = tempfile::tempdir().unwrap();
    let mirror = Mirror::open_or_clone(cache.path(), "demo", &source.url()).unwrap();
    let shas = |n| -> Vec<String> {
        mirror
            .first_parent_history("main", n)
            .unwrap()
            .into_iter()
            .map(|c| c.sha)
            .collect()
    };
    let expected: Vec<String> = [merge, main, root].iter().map(Oid::to_string).collect();
    assert_eq!(shas(100), expected);
    assert_eq!(shas(2), expected[..2]);
    assert!(shas(0).is_empty());
    let history = mirror.first_parent_history("main", 1).unwrap();
    assert_eq!(history[0].parents, vec![main.to_string(), side.to_string()]);
    assert!(mirror.first_parent_history("missing", 5).is_err());
}

#[test]
fn the_mirror_knows_the_remotes_default_branch() {
    let mut source = Source::new();
    source.commit("trunk", &[("a", "1")], "first", &[]);
    source.commit("feature", &[("a", "2")], "other", &[]);
    source.repo.set_head("refs/heads/trunk").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mirror = Mirror::open_or_clone(cache.path(), "r", &source.url()).unwrap();
    assert_eq!(mirror.default_branch().as_deref(), Some("trunk"));
    source.repo.set_head("refs/heads/feature").unwrap();
    mirror.fetch().unwrap();
    assert_eq!(mirror.default_branch().as_deref(), Some("feature"));
}

#[test]
fn checkout_replaces_the_work_tree_with_each_commit() {
    let mut source = Source::new();
    let files = [
        ("a.txt", "one"),
        ("dir/b.txt", "bee"),
        ("dir/deep/c.txt", "sea"),
    ];
    let first = source.commit("main", &files, "first", &[]);
    let second = source.commit(
        "main",
        &[("a.txt", "two"), ("new.txt", "new")],
        "second",
        &[first],
    );
    let cache = tempfile::tempdir().unwrap();
    let mirror = Mirror::open_or_clone(cache.path(), "demo", &source.url()).unwrap();
    let worktree = cache.path().join("work").join("job-1");

    mirror.checkout(&first.to_string(), &worktree).unwrap();
    assert_eq!(read(&worktree, "a.txt").as_deref(), Some("one"));
    assert_eq!(read(&worktree, "dir/deep/c.txt").as_deref(), Some("sea"));
    fs::write(worktree.join("stale.log"), "left over").unwrap();
    fs::create_dir_all(worktree.join("build/out")).unwrap();

    mirror.checkout(&second.to_string(), &worktree).unwrap();
    assert_eq!(read(&worktree, "a.txt").as_deref(), Some("two"));
    assert_eq!(read(&worktree, "new.txt").as_deref(), Some("new"));
    for gone in ["dir", "stale.log", "build"] {
        assert!(!worktree.join(gone).exists(), "{gone} should be gone");
    }
    mirror.checkout(&first.to_string(), &worktree).unwrap();
    assert_eq!(read(&worktree, "dir/b.txt").as_deref(), Some("bee"));
    assert!(!worktree.join("new.txt").exists());
    assert!(mirror.path().join("HEAD").exists(), "the mirror stays bare");
    assert!(
        !mirror.path().join("index").exists(),
        "checkout leaves no index in it"
    );
}

#[test]
fn checkout_of_a_missing_commit_names_it() {
    let mut source = Source::new();
    source.commit("main", &[("a", "1")], "first", &[]);
    let cache = tempfile::tempdir().unwrap();
    let mirror = Mirror::open_or_clone(cache.path(), "demo", &source.url()).unwrap();
    let missing = "ab".repeat(20);
    let error = mirror
        .checkout(&missing, &cache.path().join("w"))
        .unwrap_err();
    assert!(matches!(error, MirrorError::MissingCommit { .. }));
    assert!(error.to_string().contains(&missing), "{error}");
    let error = mirror
        .checkout("main", &cache.path().join("w"))
        .unwrap_err();
    assert!(matches!(error, MirrorError::InvalidSha { .. }), "{error}");
}

#[test]
fn read_file_at_distinguishes_missing_large_and_directory_paths() {
    let mut source = Source::new();
    let sha = source
        .commit(
            "main",
            &[("kymo.toml", "[[suite]]"), ("src/lib.rs", "//")],
            "c",
            &[],
        )
        .to_string();
    let cache = tempfile::tempdir().unwrap();
    let mirror = Mirror::open_or_clone(cache.path(), "demo", &source.url()).unwrap();
    assert_eq!(
        mirror
            .read_file_at(&sha, "kymo.toml", 100)
            .unwrap()
            .unwrap(),
        b"[[suite]]"
    );
    assert_eq!(
        mirror.read_file_at(&sha, "missing.toml", 100).unwrap(),
        None
    );
    assert_eq!(
        mirror.read_file_at(&sha, "../kymo.toml", 100).unwrap(),
        None
    );
    assert!(matches!(
        mirror.read_file_at(&sha, "kymo.toml", 8),
        Err(MirrorError::FileTooLarge {
            size: 9,
            max: 8,
            ..
        })
    ));
    assert!(matches!(
        mirror.read_file_at(&sha, "src", 100),
        Err(MirrorError::NotAFile { .. })
    ));
}

#[test]
fn hostile_repository_names_stay_inside_the_cache() {
    for name in [
        "../escape",
        "..",
        ".",
        "a/b",
        "/abs",
        "a\0b",
        "nul\u{0}",
        "%2E",
        "ünï",
    ] {
        let dir = mirror_dir_name(name).unwrap();
        assert!(
            !dir.contains('/') && !dir.contains('\0') && !dir.starts_with('.'),
            "{dir}"
        );
    }
    assert_ne!(
        mirror_dir_name("a/b").unwrap(),
        mirror_dir_name("a%2Fb").unwrap()
    );
    assert_eq!(
        mirror_dir_name("kymo-demo_1.x").unwrap(),
        "kymo-demo_1.x.git"
    );
    assert!(mirror_dir_name("").is_err());
    assert!(mirror_dir_name(&"/".repeat(100)).is_err());

    let mut source = Source::new();
    let sha = source.commit("main", &[("a", "1")], "first", &[]);
    let cache = tempfile::tempdir().unwrap();
    let mirror = Mirror::open_or_clone(cache.path(), "../../escape", &source.url()).unwrap();
    assert_eq!(
        mirror.path().parent().unwrap(),
        cache.path().join("mirrors")
    );
    assert!(mirror.has_commit(&sha.to_string()));
}

#[test]
fn reopening_reuses_the_mirror_and_follows_a_new_url() {
    let mut first_source = Source::new();
    let old = first_source.commit("main", &[("a", "1")], "old", &[]);
    let mut second_source = Source::new();
    let new = second_source.commit("main", &[("b", "2")], "new", &[]);
    let cache = tempfile::tempdir().unwrap();
    Mirror::open_or_clone(cache.path(), "demo", &first_source.url()).unwrap();
    let reopened = Mirror::open_or_clone(cache.path(), "demo", &second_source.url()).unwrap();
    assert!(
        reopened.has_commit(&old.to_string()),
        "the old objects are kept"
    );
    reopened.fetch().unwrap();
    assert_eq!(reopened.resolve("main").unwrap(), new.to_string());
}

#[test]
fn a_failed_clone_leaves_nothing_behind() {
    let cache = tempfile::tempdir().unwrap();
    let missing = cache.path().join("no-such-repo");
    let error = Mirror::open_or_clone(cache.path(), "demo", missing.to_str().unwrap()).unwrap_err();
    assert!(error.to_string().contains("no-such-repo"), "{error}");
    let left: Vec<_> = fs::read_dir(cache.path().join("mirrors"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != PARTIAL_DIR)
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let partials = cache.path().join("mirrors").join(PARTIAL_DIR);
    assert_eq!(fs::read_dir(partials).unwrap().count(), 0);
}

#[test]
fn clones_left_by_killed_processes_are_removed_and_live_ones_kept() {
    let mut source = Source::new();
    source.commit("main", &[("a", "1")], "first", &[]);
    let cache = tempfile::tempdir().unwrap();
    let partials = cache.path().join("mirrors").join(PARTIAL_DIR);
    // pid 1 always runs; no process has a pid past the kernel's limit (at most 2^22).
    let clone_of =
        |name: &str, pid: u32| partials.join(format!("{}.{pid}", mirror_dir_name(name).unwrap()));
    let gone = clone_of("demo", 4_999_999);
    let running = clone_of("demo", 1);
    let other_mirror = clone_of("demo-two", 4_999_999);
    for dir in [&gone, &running, &other_mirror] {
        fs::create_dir_all(dir.join("objects")).unwrap();
    }
    Mirror::open_or_clone(cache.path(), "demo", &source.url()).unwrap();
    assert!(!gone.exists(), "a dead process's clone is removed");
    assert!(running.exists(), "a running process's clone stays");
    assert!(
        other_mirror.exists(),
        "another mirror's clone is its own clone's business"
    );
}

#[test]
fn https_urls_are_supported() {
    let cache = tempfile::tempdir().unwrap();
    // Port 1 on loopback refuses at once: the error must come from connecting, which
    // shows that this build of libgit2 has an https transport.
    let url = "https://127.0.0.1:1/repo.git";
    let error = Mirror::open_or_clone(cache.path(), "remote", url).unwrap_err();
    let message = error.to_string();
    assert!(message.contains(url), "{message}");
    // Without a TLS backend libgit2 fails before connecting ("no TLS stream available").
    assert!(message.contains("connect"), "{message}");
}

#[test]
fn concurrent_opens_and_fetches_of_one_mirror_all_succeed() {
    let mut source = Source::new();
    let sha = source
        .commit("main", &[("a", "1")], "first", &[])
        .to_string();
    let cache = tempfile::tempdir().unwrap();
    let url = source.url();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let mirror = Mirror::open_or_clone(cache.path(), "demo", &url).unwrap();
                mirror.fetch().unwrap();
                assert_eq!(mirror.resolve("main").unwrap(), sha);
            });
        }
    });
    let entries = fs::read_dir(cache.path().join("mirrors")).unwrap().count();
    assert_eq!(entries, 2, "one mirror and the clones' directory");
    let partials = cache.path().join("mirrors").join(PARTIAL_DIR);
    assert_eq!(fs::read_dir(partials).unwrap().count(), 0, "no leftovers");
}
