// The platform's floor for an unchanged rescan from a fresh Node process
// (bench/scan.mjs; not Knowledge): list every folder under ROOT and lstat
// every file in it, nothing else — no store, no comparison, no output but a
// count. With --workers=N the folders are dealt out to N worker threads, as
// Knowledge's scan does (src/scan/prefetch.ts); without, one thread.
//   node bench/list-floor.mjs ROOT [--workers=N]
import { readdirSync, lstatSync } from 'node:fs';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

function walk(dir) {
  let files = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory()) files += walk(p);
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
    console.log(walk(root));
  } else {
    // Folders found breadth-first until each worker has several; the folders opened on the way are listed
    // (and their files lstat'ed) here, once, and the workers walk the rest.
    let files = 0;
    let frontier = [root];
    while (frontier.length > 0 && frontier.length < n * 8) {
      const next = [];
      for (const d of frontier) {
        for (const e of readdirSync(d, { withFileTypes: true })) {
          if (e.isDirectory()) next.push(`${d}/${e.name}`);
          else if (e.isFile()) {
            lstatSync(`${d}/${e.name}`);
            files++;
          }
        }
      }
      frontier = next;
    }
    const tasks = frontier;
    let done = 0;
    for (let w = 0; w < n; w++) {
      new Worker(new URL(import.meta.url), { workerData: tasks.filter((_, i) => i % n === w) }).on('message', (count) => {
        files += count;
        if (++done === n) console.log(files);
      });
    }
  }
} else {
  parentPort.postMessage(workerData.reduce((sum, dir) => sum + walk(dir), 0));
}
