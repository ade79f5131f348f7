/** Read side: FTS5 search index over records (issue: reading surfaces). */
export default ``;
