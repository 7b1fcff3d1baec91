use super::*;

fn entry(engine: i64, knobs: &[(i32, i64)], median_ms: f64) -> Entry {
    Entry { choice: PlanChoice { engine, knobs: knobs.to_vec() }, median_ms }
}

const KEY: &str =
    "cudnn90600-GPU-0a1b2c3d-0000-1111-2222-333344445555/n1c64h32w48-k64r3s3-p1.1.1.1-st1.1-d1.1-f16-prelu";

#[test]
fn lines_round_trip() {
    let mut entries = BTreeMap::new();
    entries.insert(KEY.to_string(), entry(12, &[(24, 3), (25, 0), (2, -1)], 0.4375));
    entries.insert("other/key".to_string(), entry(0, &[], 1.0 / 3.0));
    let text = render(&entries);
    assert!(text.starts_with('#'), "{text}");
    assert!(text.contains(&format!("{KEY}\t12\t24=3,25=0,2=-1\t0.4375\n")), "{text}");
    assert!(text.contains("other/key\t0\t\t0.3333333333333333\n"), "{text}");
    assert_eq!(parse(&text), entries);
    // The knob order is kept (cuDNN lists them in its own order).
    assert_eq!(parse(&text)[KEY].choice.knobs_text(), "24=3,25=0,2=-1");
}

#[test]
fn garbled_lines_are_ignored() {
    let text = format!(
        "# comment\n\
         \n\
         just garbage\n\
         {KEY}\t12\n\
         {KEY}\tx\t\t0.5\n\
         {KEY}\t-3\t\t0.5\n\
         {KEY}\t12\t24\t0.5\n\
         {KEY}\t12\t24=a\t0.5\n\
         {KEY}\t12\t24=1,\t0.5\n\
         {KEY}\t12\t\tNaN\n\
         {KEY}\t12\t\t-1\n\
         {KEY}\t12\t\t0.5\textra\n\
         \t12\t\t0.5\n\
         good\t4\t1=2\t0.25\r\n\
         \u{fffd}\u{0}\t1\t\t1\n"
    );
    let entries = parse(&text);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries["good"], entry(4, &[(1, 2)], 0.25));
    assert!(parse("").is_empty());
    assert!(parse("\u{0}\u{1}binary\n\t\t\t\n").is_empty());
}

#[test]
fn a_later_entry_for_a_key_replaces_the_earlier() {
    let text = format!("{KEY}\t1\t\t2.0\nb\t2\t\t1.0\n{KEY}\t9\t24=1\t1.5\n");
    let entries = parse(&text);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[KEY], entry(9, &[(24, 1)], 1.5));
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("neural-frame-cudnn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn store_and_lookup_through_a_file() {
    let dir = temp_dir("store");
    let path = dir.join(FILE_NAME);
    // Missing file (and directory): nothing, and storing creates both.
    assert_eq!(lookup(&path, KEY), None);
    store(&path, KEY, entry(3, &[(24, 1)], 0.5));
    store(&path, "second", entry(4, &[], 0.25));
    assert_eq!(lookup(&path, KEY), Some(entry(3, &[(24, 1)], 0.5)));
    // A newer choice for the key replaces the old one; the other entry stays.
    store(&path, KEY, entry(7, &[(25, 2)], 0.375));
    assert_eq!(lookup(&path, KEY), Some(entry(7, &[(25, 2)], 0.375)));
    assert_eq!(lookup(&path, "second"), Some(entry(4, &[], 0.25)));
    let text = std::fs::read_to_string(&path).expect("the cache file");
    assert_eq!(text.lines().filter(|l| l.starts_with(KEY)).count(), 1, "{text}");
    // No temporary files left beside it: the cache and its lock file only.
    let mut names: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().map(|e| e.file_name()).collect();
    names.sort();
    assert_eq!(names, [format!(".{FILE_NAME}.lock"), FILE_NAME.to_owned()].map(std::ffi::OsString::from));
    // A key that cannot be one field is not stored.
    store(&path, "bad\tkey", entry(1, &[], 1.0));
    assert_eq!(parse(&std::fs::read_to_string(&path).expect("the cache file")).len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_garbled_or_unreadable_file_reads_as_empty_and_is_rewritten() {
    let dir = temp_dir("garbled");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(FILE_NAME);
    std::fs::write(&path, [0xff, 0xfe, 0x00, b'\t', b'\n', 0x80]).expect("write");
    assert_eq!(lookup(&path, KEY), None);
    store(&path, KEY, entry(2, &[], 1.25));
    assert_eq!(lookup(&path, KEY), Some(entry(2, &[], 1.25)));
    // A directory where the file should be: nothing found, and storing only logs.
    let blocked = dir.join("blocked");
    std::fs::create_dir_all(&blocked).expect("dir");
    assert_eq!(lookup(&blocked, KEY), None);
    store(&blocked, KEY, entry(2, &[], 1.25));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uuids_read_as_nvidia_smi_writes_them() {
    let b: [u8; 16] = std::array::from_fn(|i| (i as u8) * 17);
    assert_eq!(uuid_text(&b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

#[test]
fn the_cache_path_defaults_once() {
    let first = plan_cache_or(|| Some(PathBuf::from("/tmp/a.tsv")));
    // Set now: a later default is not used.
    assert_eq!(plan_cache_or(|| Some(PathBuf::from("/tmp/b.tsv"))), first);
    set_plan_cache(None);
    assert_eq!(plan_cache_or(|| Some(PathBuf::from("/tmp/c.tsv"))), None);
    set_plan_cache(Some(PathBuf::from("/tmp/d.tsv")));
    assert_eq!(plan_cache_or(|| None), Some(PathBuf::from("/tmp/d.tsv")));
}
