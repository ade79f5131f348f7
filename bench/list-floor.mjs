// The platform's floor for an unchanged rescan from a fresh Node process
// (bench/scan.mjs; not Knowledge): list every folder under ROOT and lstat
// every file in it, nothing else — no store, no comparison, no output but a
// count. With --workers=N the folders are dealt out to N worker threads, as
// Knowledge's scan does (src/scan/prefetch.ts); without, one thread.
//   node bench/list-floor.mjs ROOT [--workers=N]
import { readdirSync, lstatSync } from 'node:fs';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

function walk(dir, recursive) {
  let files = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory()) files += recursive ? walk(p, true) : 0;
    else if (e.isFile()) {
      lstatSync(p);
      files++;
    }
  }
  return files;
}

if (isMainThread) {
  const root = process.argv[2];
  const n = Number(process.argv.find((a) => a.startsWith('--workers='))?.slice(10) ?? 0);
  if (!root) throw new Error('usage: node bench/list-floor.mjs ROOT [--workers=N]');
  if (n === 0) {
    console.log(walk(root, true));
  } else {
    // Folders found breadth-first until each worker has several (each is listed by one worker, without its
    // opened subfolders, which are folders of their own).
    let frontier = [root];
    const tasks = [];
    while (frontier.length > 0 && frontier.length + tasks.length < n * 8) {
      const next = [];
      for (const d of frontier) {
        tasks.push({ dir: d, recursive: false });
        for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) next.push(`${d}/${e.name}`);
      }
      frontier = next;
    }
    for (const d of frontier) tasks.push({ dir: d, recursive: true });
    let files = 0;
    let done = 0;
    for (let w = 0; w < n; w++) {
      new Worker(new URL(import.meta.url), { workerData: tasks.filter((_, i) => i % n === w) }).on('message', (count) => {
        files += count;
        if (++done === n) console.log(files);
      });
    }
  }
} else {
  parentPort.postMessage(workerData.reduce((sum, t) => sum + walk(t.dir, t.recursive), 0));
}
