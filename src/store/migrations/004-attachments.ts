/** Attachments: chunked uploads (issue: attachments). */
export default ``;
