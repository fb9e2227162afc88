-- Images kept with a memory (issue 36, part 3): the files live in the images folder (FROBOZZ_CORTEX_IMAGES_DIR,
-- default DATA_DIR/images); this row names them. Numbered 008 so that a 007 of another branch cannot collide.
CREATE TABLE memory_images (
    memory_id bigint PRIMARY KEY REFERENCES memories ON DELETE CASCADE,
    media_type text NOT NULL,
    bytes bigint NOT NULL,
    width int NOT NULL,
    height int NOT NULL,
    sha256 text NOT NULL,
    original text NOT NULL,   -- file names in the images folder, never paths
    thumbnail text NOT NULL,  -- a JPEG, long edge at most 768 px
    thumbnail_width int NOT NULL,
    thumbnail_height int NOT NULL,
    description text,         -- what the vision model saw (NULL: none configured, or it failed)
    described_by text,
    created_at timestamptz NOT NULL DEFAULT now()
);
