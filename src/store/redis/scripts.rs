//! The Lua scripts of a run's life on Redis: renewing and releasing a lease for its holder, appending
//! an event, creating a run, ending it (whoever ends it, and as its runner reports it), and changing its
//! status, with the helpers they share ([`LUA_HELPERS`]) and the terminal statuses as they read them
//! ([`terminal_list`]). The operations that run them are in `runs.rs` and `events.rs`.

use crate::run::RunStatus;

/// Extends the lease in `KEYS[1]` to `ARGV[2]` milliseconds if `ARGV[1]` holds it; returns 1 if it did.
pub(super) const RENEW_LEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

/// Deletes the lease in `KEYS[1]` if `ARGV[1]` holds it.
pub(super) const RELEASE_LEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

/// The Lua helpers every run script shares: `terminal(status)`, against the comma-framed list of
/// terminal statuses in `ARGV[T]` (`,completed,failed,cancelled,interrupted,`), and `ended(run_id)`, true
/// for a run whose record is terminal or gone. `T` is replaced by each script's own index.
const LUA_HELPERS: &str = r"
    local function terminal(s) return string.find(ARGV[T], ',' .. tostring(s) .. ',', 1, true) ~= nil end
    local function ended(id)
      local raw = redis.call('GET', 'yuxi:run:' .. id .. ':record')
      if not raw then return true end
      return terminal(cjson.decode(raw).status)
    end
    local function notice(key, suffix)
      redis.call('PUBLISH', (string.gsub(key, suffix .. '$', ':notice')), '1')
    end
    local function forget_active(record)
      redis.call('SREM', 'yuxi:user:' .. record.uid .. ':active_runs', record.run_id)
      redis.call('SREM', 'yuxi:active_runs', record.run_id)
    end
    ";

/// Appends one event to a run's stream, unless the run has its result (and so its `end`, written in the
/// same step): nothing follows `end`, even from a runner that has not yet seen its run ended elsewhere.
/// `KEYS`: the stream, the result. `ARGV`: the stream's approximate maximum length, the event, its data,
/// the stream's time to live, the run's notice channel. Returns the event's id, or `false` when the run
/// has ended.
const APPEND_EVENT: &str = r"
    if redis.call('EXISTS', KEYS[2]) == 1 then return false end
    local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'event', ARGV[2], 'data', ARGV[3])
    redis.call('EXPIRE', KEYS[1], ARGV[4])
    redis.call('PUBLISH', ARGV[5], '1')
    return id
    ";

/// Creates a run. `KEYS`: the record, the thread's lock, the start key (`''` for none), the thread's
/// owner, the parent's children (`''` for none), the user's unfinished runs, everyone's unfinished runs,
/// the run's keeper, the user's list of runs, everyone's list of runs. `ARGV`: the run id, the record's
/// JSON, the start key's time to live, the uid, the children's time to live, the per-user and total
/// limits of unfinished runs, the state's time to live, the terminal statuses (see [`LUA_HELPERS`]), the
/// keeper's time to live, the run's creation in milliseconds (its score in the lists), the user's and
/// everyone's list bounds (the oldest beyond them are dropped). Returns `{outcome, run_id}`;
/// `{'limited', 'user' | 'total'}` when a limit is reached. A thread lock whose run has ended (or is
/// gone) is stale and taken over. A set of unfinished runs is pruned of ended and vanished runs only when
/// it has reached its limit, so a run that ended however it ended stops counting and a create stays
/// O(1) below the limit.
const CREATE_RUN: &str = r"
    if KEYS[3] ~= '' then
      local existing = redis.call('GET', KEYS[3])
      if existing then return {'existing', existing} end
    end
    local active = redis.call('GET', KEYS[2])
    if active then
      if ended(active) then redis.call('DEL', KEYS[2]) else return {'busy', active} end
    end
    local function full(set, limit)
      if redis.call('SCARD', set) < limit then return false end
      local n = 0
      for _, id in ipairs(redis.call('SMEMBERS', set)) do
        if ended(id) then redis.call('SREM', set, id) else n = n + 1 end
      end
      return n >= limit
    end
    if full(KEYS[6], tonumber(ARGV[6])) then return {'limited', 'user'} end
    if full(KEYS[7], tonumber(ARGV[7])) then return {'limited', 'total'} end
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[8])
    redis.call('SET', KEYS[2], ARGV[1])
    redis.call('SET', KEYS[4], ARGV[4], 'NX')
    redis.call('EXPIRE', KEYS[4], ARGV[8])
    if KEYS[3] ~= '' then redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[3]) end
    if KEYS[5] ~= '' then
      redis.call('SADD', KEYS[5], ARGV[1])
      redis.call('EXPIRE', KEYS[5], ARGV[5])
    end
    redis.call('SADD', KEYS[6], ARGV[1])
    redis.call('SADD', KEYS[7], ARGV[1])
    redis.call('SET', KEYS[8], 'created', 'EX', ARGV[10])
    for i, cap in ipairs({ARGV[12], ARGV[13]}) do
      local index = KEYS[8 + i]
      redis.call('ZADD', index, ARGV[11], ARGV[1])
      redis.call('ZREMRANGEBYRANK', index, 0, -1 - tonumber(cap))
      redis.call('EXPIRE', index, ARGV[8])
    end
    return {'started', ARGV[1]}
    ";

/// Ends a run that has not ended, in one step: its record's status and error, its thread's lock
/// released, its result (unless the runner wrote one), one `end` event on its stream, its keeper gone,
/// and it no longer counted as unfinished. `KEYS`: the record, the thread's lock, the result, the event
/// stream, the runner's lease, the keeper. `ARGV`: the status, the error (`''` for none), the result's
/// JSON, the `end` envelope's JSON, the stream's length bound, its time to live, the result's time to
/// live, the terminal statuses, and `'1'` to end it only if it is abandoned (neither a lease nor a keeper
/// exists). Returns 1 if it ended the run, 0 if it had ended already (or is not abandoned).
const END_RUN: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if not raw then return 0 end
    local record = cjson.decode(raw)
    if terminal(record.status) then return 0 end
    if ARGV[9] == '1' and (redis.call('EXISTS', KEYS[5]) == 1 or redis.call('EXISTS', KEYS[6]) == 1) then
      return 0
    end
    record.status = ARGV[1]
    record.waiting = nil
    record.ended_at = cjson.decode(ARGV[4]).created_at
    if ARGV[2] ~= '' then record.error = ARGV[2] end
    redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
    if redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
    redis.call('SET', KEYS[3], ARGV[3], 'NX', 'EX', ARGV[7])
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'event', 'end', 'data', ARGV[4])
    redis.call('EXPIRE', KEYS[4], ARGV[6])
    redis.call('DEL', KEYS[6])
    forget_active(record)
    notice(KEYS[4], ':events')
    return 1
    ";

/// The runner's end of its run, in one step: the new messages appended to the thread (bounded, with its
/// time to live), the result, an `error` event (when failed), the `end` event, the record's terminal
/// status with its thread's lock released, the keeper gone. `KEYS`: the record, the thread's lock, the
/// result, the event stream, the thread's messages, the keeper. `ARGV`: the status, the error (`''`),
/// the result's JSON, the `error` envelope's JSON (`''` for none), the `end` envelope's JSON, the
/// stream's length bound, its time to live, the result's time to live, the most messages a thread
/// keeps, the state's time to live, the terminal statuses, then the new messages' JSON. Returns 1 if it
/// ended the run; 0, writing nothing, if the run had ended already (a sweeper or a cancel ended it, or a
/// run without a record has a result).
pub(super) const FINISH_RUN: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if raw then
      local record = cjson.decode(raw)
      if terminal(record.status) then return 0 end
      record.status = ARGV[1]
      record.waiting = nil
      record.ended_at = cjson.decode(ARGV[5]).created_at
      if ARGV[2] ~= '' then record.error = ARGV[2] end
      redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
      if redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
      forget_active(record)
    elseif redis.call('EXISTS', KEYS[3]) == 1 then
      return 0
    end
    for i = 12, #ARGV do redis.call('RPUSH', KEYS[5], ARGV[i]) end
    redis.call('LTRIM', KEYS[5], -tonumber(ARGV[9]), -1)
    redis.call('EXPIRE', KEYS[5], ARGV[10])
    redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[8])
    if ARGV[4] ~= '' then
      redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'event', 'error', 'data', ARGV[4])
    end
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'event', 'end', 'data', ARGV[5])
    redis.call('EXPIRE', KEYS[4], ARGV[7])
    redis.call('DEL', KEYS[6])
    notice(KEYS[4], ':events')
    return 1
    ";

/// `body` with [`LUA_HELPERS`] before it, reading the terminal statuses from `ARGV[terminal_at]`.
fn script(body: &str, terminal_at: usize) -> redis::Script {
    redis::Script::new(&format!("{}{body}", LUA_HELPERS.replace("ARGV[T]", &format!("ARGV[{terminal_at}]"))))
}

pub(super) static APPEND_EVENT_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(APPEND_EVENT));
pub(super) static CREATE_RUN_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| script(CREATE_RUN, 9));
pub(super) static END_RUN_SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| script(END_RUN, 8));
pub(super) static FINISH_RUN_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| script(FINISH_RUN, 11));

/// The terminal statuses as [`LUA_HELPERS`] reads them: `,completed,failed,cancelled,interrupted,`.
pub(super) fn terminal_list() -> String {
    let mut list = String::from(",");
    for status in RunStatus::TERMINAL {
        list.push_str(status.as_str());
        list.push(',');
    }
    list
}

/// Moves a run to a status. `KEYS`: the record, the thread's lock. `ARGV`: the new status, the error
/// (`''` for none), `'1'` to release the thread's lock, the status the run must be in (`''` for any), then
/// the terminal statuses ([`RunStatus::TERMINAL`]), which a run never leaves. Returns 1 if it changed.
pub(super) const SET_RUN_STATUS: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if not raw then return 0 end
    local record = cjson.decode(raw)
    local s = record.status
    for i = 5, #ARGV do
      if s == ARGV[i] then return 0 end
    end
    if ARGV[4] ~= '' and s ~= ARGV[4] then return 0 end
    record.status = ARGV[1]
    if ARGV[2] ~= '' then record.error = ARGV[2] end
    redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
    if ARGV[3] == '1' and redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
    redis.call('PUBLISH', (string.gsub(KEYS[1], ':record$', ':notice')), '1')
    return 1
    ";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keys;

    #[test]
    fn the_scripts_name_keys_as_the_keys_module_does() {
        // The shared helpers read a member's record and forget an ended run's counts by keys they build
        // themselves: they must be those of the keys module.
        assert_eq!(keys::run_record("ID"), "yuxi:run:ID:record");
        assert!(LUA_HELPERS.contains("'yuxi:run:' .. id .. ':record'"));
        assert_eq!(keys::user_active_runs("U"), "yuxi:user:U:active_runs");
        assert!(LUA_HELPERS.contains("'yuxi:user:' .. record.uid .. ':active_runs'"));
        assert!(LUA_HELPERS.contains(&format!("'{}'", keys::ACTIVE_RUNS)));
    }

    #[test]
    fn the_terminal_statuses_are_framed_so_no_status_matches_inside_another() {
        assert_eq!(terminal_list(), ",completed,failed,cancelled,interrupted,");
        for status in RunStatus::ALL {
            assert_eq!(terminal_list().contains(&format!(",{status},")), status.is_terminal(), "{status}");
        }
    }
}
