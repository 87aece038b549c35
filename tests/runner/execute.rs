//! The `execute` tool's executors: a local subprocess with an emptied environment, and the sandbox
//! container's side (`yuxi-operator sandbox-exec`) over a real Unix socket.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use yuxi_operator::runner::tools::execute::{
    Confinement, ExecRequest, Executor, LocalExecutor, MAX_OUTCOME_BYTES, MAX_OUTPUT_BYTES, SandboxSocket,
};

fn request(command: &str, timeout_seconds: u64) -> ExecRequest {
    ExecRequest { command: command.to_string(), timeout_seconds, max_output_bytes: MAX_OUTPUT_BYTES }
}

#[tokio::test]
async fn a_command_runs_in_the_workdir_with_stderr_and_exit_code() {
    let dir = TempDir::new().expect("temp dir");
    let executor = LocalExecutor::plain(dir.path());
    let outcome = executor.execute(&request("echo out; echo err >&2; pwd; exit 3", 10)).await.expect("runs");
    let pwd = dir.path().canonicalize().expect("path");
    assert_eq!(outcome.output, format!("out\nerr\n{}\n", pwd.display()));
    assert_eq!(outcome.exit_code, Some(3));
    assert!(!outcome.timed_out);
}

#[tokio::test]
async fn the_environment_is_emptied() {
    let dir = TempDir::new().expect("temp dir");
    // The test process's own environment (with whatever it holds) must not reach the command.
    let outcome = LocalExecutor::plain(dir.path()).execute(&request("env", 10)).await.expect("runs");
    let names: Vec<&str> = outcome.output.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k)).collect();
    let mut expected = vec!["HOME", "LANG", "PATH", "PWD"];
    let mut names: Vec<&str> = names.into_iter().filter(|n| *n != "SHLVL" && *n != "_").collect();
    names.sort_unstable();
    expected.sort_unstable();
    assert_eq!(names, expected, "{}", outcome.output);
}

#[tokio::test]
async fn a_command_past_its_time_out_is_killed_with_its_children() {
    let dir = TempDir::new().expect("temp dir");
    let marker = dir.path().join("survived");
    let command = format!("(sleep 3; touch {}) & sleep 30", marker.display());
    let started = Instant::now();
    let outcome = LocalExecutor::plain(dir.path()).execute(&request(&command, 1)).await.expect("runs");
    assert!(outcome.timed_out);
    assert!(started.elapsed() < Duration::from_secs(5));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "the background child was killed with the group");
}

#[tokio::test]
async fn a_timed_out_command_keeps_the_output_it_wrote() {
    let dir = TempDir::new().expect("temp dir");
    let outcome = LocalExecutor::plain(dir.path()).execute(&request("echo before; sleep 30", 1)).await.expect("runs");
    assert!(outcome.timed_out);
    assert_eq!(outcome.output, "before\n");
}

#[tokio::test]
async fn output_is_bounded() {
    let dir = TempDir::new().expect("temp dir");
    let mut req = request("head -c 100000 /dev/zero | tr '\\0' 'a'", 10);
    req.max_output_bytes = 1000;
    let outcome = LocalExecutor::plain(dir.path()).execute(&req).await.expect("runs");
    assert_eq!(outcome.output.len(), 1000);
    assert_eq!(outcome.truncated_bytes, 99_000);
    assert_eq!(outcome.exit_code, Some(0));
}

struct Sandbox {
    child: Child,
    socket: std::path::PathBuf,
    _dir: TempDir,
    workdir: TempDir,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `yuxi-operator sandbox-exec` on a socket in a fresh folder, with a secret in its environment.
fn sandbox() -> Sandbox {
    let dir = TempDir::new().expect("temp dir");
    let workdir = TempDir::new().expect("temp dir");
    let socket = dir.path().join("sandbox.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"))
        .args(["sandbox-exec", "--socket"])
        .arg(&socket)
        .arg("--workdir")
        .arg(workdir.path())
        .env("OPENAI_API_KEY", "sk-should-not-leak")
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "sandbox-exec did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    Sandbox { child, socket, _dir: dir, workdir }
}

#[tokio::test]
async fn the_sandbox_container_runs_commands_over_its_socket() {
    let sandbox = sandbox();
    let executor = Executor::Socket(SandboxSocket::new(&sandbox.socket));
    let outcome = executor.execute(&request("echo hi > made.txt; cat made.txt; env; exit 4", 10)).await.expect("runs");
    assert!(outcome.output.starts_with("hi\n"), "{}", outcome.output);
    assert!(!outcome.output.contains("sk-should-not-leak"), "{}", outcome.output);
    assert_eq!(outcome.exit_code, Some(4));
    assert_eq!(std::fs::read_to_string(sandbox.workdir.path().join("made.txt")).expect("made"), "hi\n");

    let timed = executor.execute(&request("sleep 30", 1)).await.expect("runs");
    assert!(timed.timed_out);
}

#[test]
fn the_sandbox_container_ends_on_sigterm_so_its_pod_ends_with_the_runner() {
    let mut sandbox = sandbox();
    // SAFETY: kill(2) on the child this test started and still holds.
    let sent = unsafe { libc::kill(sandbox.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = sandbox.child.try_wait().expect("waits") {
            break status;
        }
        assert!(Instant::now() < deadline, "sandbox-exec still runs 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn the_sandbox_answers_a_malformed_request_and_keeps_serving() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let sandbox = sandbox();
    let mut stream = tokio::net::UnixStream::connect(&sandbox.socket).await.expect("connects");
    stream.write_all(b"{not json}\n").await.expect("writes");
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).await.expect("answers");
    assert!(answer.contains("not an execute request"), "{answer}");
    let outcome = Executor::Socket(SandboxSocket::new(&sandbox.socket))
        .execute(&request("echo still here", 10))
        .await
        .expect("runs");
    assert_eq!(outcome.output, "still here\n");
}

#[tokio::test]
async fn an_unreachable_sandbox_is_an_error() {
    let dir = TempDir::new().expect("temp dir");
    let err = Executor::Socket(SandboxSocket::new(dir.path().join("missing.sock")))
        .execute(&request("true", 1))
        .await
        .expect_err("no sandbox")
        .to_string();
    assert!(err.contains("cannot reach the sandbox"), "{err}");
}

#[tokio::test]
async fn isolated_commands_see_only_the_volumes_at_the_models_paths() {
    use yuxi_operator::runner::tools::files::VolumePaths;
    assert!(
        std::path::Path::new("/usr/bin/bwrap").exists(),
        "bubblewrap is missing: `make test` installs it (apt-get install bubblewrap)"
    );
    let root = TempDir::new().expect("temp dir");
    let volumes = VolumePaths::under(root.path());
    volumes.create_all().expect("mkdir");
    std::fs::write(volumes.skills.join("SKILL.md"), "skill text").expect("write");
    std::fs::write(root.path().join("outside.txt"), "outside").expect("write");

    let executor = LocalExecutor::isolated(&volumes, Confinement::Required).await;
    assert!(executor.is_isolated(), "bwrap works on this machine, so commands must run inside it");
    let script = format!(
        "pwd; ls /home/gem/user-data; cat /home/gem/skills/SKILL.md; echo; \
         echo made > /home/gem/user-data/outputs/made.txt; \
         touch /home/gem/skills/new 2>/dev/null || echo skills-read-only; \
         cat {} 2>/dev/null || echo outside-hidden; \
         grep CapEff /proc/self/status; \
         mount -o remount,bind,rw / 2>/dev/null && echo remounted || echo no-remount",
        root.path().join("outside.txt").display()
    );
    let outcome = executor.execute(&request(&script, 20)).await.expect("runs");
    assert_eq!(
        outcome.output,
        "/home/gem/user-data/workspace\noutputs\nuploads\nworkspace\nskill text\nskills-read-only\noutside-hidden\n\
         CapEff:\t0000000000000000\nno-remount\n"
    );
    assert_eq!(std::fs::read_to_string(volumes.outputs.join("made.txt")).expect("made"), "made\n");
}

#[tokio::test]
async fn the_sandbox_stops_a_command_when_the_runner_hangs_up() {
    use tokio::io::AsyncWriteExt;
    let sandbox = sandbox();
    let marker = sandbox.workdir.path().join("survived");
    let line = format!(
        "{{\"command\": \"sleep 2; touch {}\", \"timeout_seconds\": 30, \"max_output_bytes\": 100}}\n",
        marker.display()
    );
    let mut stream = tokio::net::UnixStream::connect(&sandbox.socket).await.expect("connects");
    stream.write_all(line.as_bytes()).await.expect("writes");
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(stream);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "the command went on after the runner hung up");
}

#[tokio::test]
async fn the_host_beyond_the_system_files_is_not_in_the_sandbox() {
    use yuxi_operator::runner::tools::files::VolumePaths;
    // In /var/tmp, a folder the host has and the sandbox does not show.
    let data = tempfile::tempdir_in("/var/tmp").expect("a temporary folder in /var/tmp");
    let volumes = VolumePaths::under(&data.path().join("mine"));
    volumes.create_all().expect("mkdir");
    std::fs::write(volumes.workspace.join("own.txt"), "own").expect("write");
    std::fs::create_dir_all(data.path().join("users/bob/workspace")).expect("mkdir");
    std::fs::write(data.path().join("users/bob/workspace/secret.txt"), "bob's").expect("write");
    let users_file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/local-users.yaml");
    assert!(users_file.is_file());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let script = format!(
        "cat {} 2>/dev/null || echo no-bob; cat {} 2>/dev/null || echo no-users-file; \
         cat own.txt; echo; ls -d /root /var /opt /srv /mnt 2>/dev/null | wc -l; ls /home; \
         test -e /etc/shadow && echo shadow || echo no-shadow; \
         (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo network || echo no-network; \
         ls /proc | grep -c '^[0-9]' ; ulimit -v",
        data.path().join("users/bob/workspace/secret.txt").display(),
        users_file.display(),
    );
    let executor = LocalExecutor::isolated(&volumes, Confinement::Required).await;
    let output = executor.execute(&request(&script, 20)).await.expect("runs").output;
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines[..3], ["no-bob", "no-users-file", "own"], "{output}");
    assert_eq!(lines[3..5], ["0", "gem"], "none of the host's other folders: {output}");
    assert_eq!(lines[5..7], ["no-shadow", "no-network"], "{output}");
    let processes: u32 = lines[7].trim().parse().expect("a count");
    assert!(processes <= 4, "its own pid namespace: {processes} processes seen\n{output}");
    assert_eq!(lines[8], (yuxi_operator::runner::tools::execute::MAX_ADDRESS_SPACE_BYTES / 1024).to_string());
}

#[tokio::test]
async fn a_process_the_command_leaves_behind_ends_with_it() {
    use yuxi_operator::runner::tools::files::VolumePaths;
    let root = TempDir::new().expect("temp dir");
    let volumes = VolumePaths::under(root.path());
    volumes.create_all().expect("mkdir");
    let executor = LocalExecutor::isolated(&volumes, Confinement::Required).await;
    // A detached sleeper with an argument nothing else uses.
    let outcome = executor.execute(&request("setsid sleep 987.654 >/dev/null 2>&1 & echo started", 20)).await;
    assert_eq!(outcome.expect("runs").output, "started\n");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let survivors = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| cmdline.windows(7).any(|w| w == b"987.654"))
        .count();
    assert_eq!(survivors, 0, "a process the command started outlived it");
}

#[tokio::test]
async fn execute_is_refused_where_bubblewrap_cannot_confine_it() {
    use yuxi_operator::runner::tools::files::VolumePaths;
    let root = TempDir::new().expect("temp dir");
    let volumes = VolumePaths::under(root.path());
    volumes.create_all().expect("mkdir");
    for bwrap in [None, Some(std::path::PathBuf::from("/bin/false"))] {
        let executor = LocalExecutor::isolated_with(bwrap.clone(), &volumes, Confinement::Required).await;
        assert!(!executor.is_isolated());
        let err = executor.execute(&request("echo ran", 5)).await.expect_err("refused").to_string();
        assert!(err.starts_with("execute is refused: bubblewrap"), "{bwrap:?}: {err}");
        assert!(err.contains("--unconfined-sandbox"), "{err}");
    }
    // Only an operator's explicit word runs them unconfined.
    let unconfined = LocalExecutor::isolated_with(None, &volumes, Confinement::Unconfined).await;
    assert_eq!(unconfined.execute(&request("echo ran", 5)).await.expect("runs").output, "ran\n");
}

#[tokio::test]
async fn an_unconfined_command_cannot_read_an_undumpable_processs_environment_even_as_root() {
    use yuxi_operator::runner::tools::files::VolumePaths;
    // What the local mode and each runner do first thing (the model key is in their environment).
    // SAFETY: prctl(PR_SET_DUMPABLE) changes only this process's own dumpable flag.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
    }
    let root = TempDir::new().expect("temp dir");
    let volumes = VolumePaths::under(root.path());
    volumes.create_all().expect("mkdir");
    let unconfined = LocalExecutor::isolated_with(None, &volumes, Confinement::Unconfined).await;
    let script = format!(
        "id -u; grep -E '^Cap(Prm|Eff|Bnd)' /proc/self/status; \
         cat /proc/{pid}/environ >/dev/null 2>&1 && echo environ-read || echo environ-refused; \
         head -c1 /proc/{pid}/mem >/dev/null 2>&1 && echo memory-read || echo memory-refused",
        pid = std::process::id()
    );
    let outcome = unconfined.execute(&request(&script, 10)).await.expect("runs");
    let lines: Vec<&str> = outcome.output.lines().collect();
    assert_eq!(lines.len(), 6, "{}", outcome.output);
    assert_eq!(&lines[1..3], ["CapPrm:\t0000000000000000", "CapEff:\t0000000000000000"], "{}", outcome.output);
    if lines[0] == "0" {
        assert_eq!(lines[3], "CapBnd:\t0000000000000000", "root keeps no capability to regain");
    }
    assert_eq!(&lines[4..], ["environ-refused", "memory-refused"], "as uid {}", lines[0]);
}

/// Listens at `path` (replacing what is there) and answers every connection with `answer`, written
/// again and again when `endless`.
fn impostor(path: &std::path::Path, answer: &'static [u8], endless: bool) {
    let _ = std::fs::remove_file(path);
    let listener = tokio::net::UnixListener::bind(path).expect("binds");
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move { while stream.write_all(answer).await.is_ok() && endless {} });
        }
    });
}

#[tokio::test]
async fn a_command_that_replaces_the_sandbox_socket_is_never_answered_by_its_impostor() {
    let sandbox = sandbox();
    let executor = Executor::Socket(SandboxSocket::new(&sandbox.socket));
    assert_eq!(executor.execute(&request("echo first", 10)).await.expect("runs").output, "first\n");
    // What a command left running in the sandbox can do: its folder is the sandbox's too.
    impostor(&sandbox.socket, b"{\"output\": \"forged\", \"exit_code\": 0, \"timed_out\": false}\n", false);
    let outcome = executor.execute(&request("echo second", 10)).await.expect("runs");
    assert_eq!(outcome.output, "second\n", "the runner reaches the socket it found first");
}

#[tokio::test]
async fn an_endless_answer_is_not_an_outcome_past_its_bound() {
    let dir = TempDir::new().expect("temp dir");
    let path = dir.path().join("sandbox.sock");
    impostor(&path, &[b'x'; 64 * 1024], true);
    let executor = Executor::Socket(SandboxSocket::new(&path));
    let answer = tokio::time::timeout(Duration::from_secs(20), executor.execute(&request("true", 1)))
        .await
        .expect("the runner stops reading at the bound, however long the answer");
    let err = answer.expect_err("not an outcome").to_string();
    assert!(err.contains("not an outcome"), "{err}");
    assert!(MAX_OUTCOME_BYTES >= 6 * MAX_OUTPUT_BYTES as u64, "a whole escaped output fits");
}
